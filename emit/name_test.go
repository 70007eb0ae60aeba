package emit_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

func TestNameShortIsJoined(t *testing.T) {
	if got := emit.Name(63, "flow", "step", "3"); got != "flow-step-3" {
		t.Errorf("Name = %q, want flow-step-3", got)
	}
}

func TestNameLongIsHashedAndDistinct(t *testing.T) {
	flow := strings.Repeat("f", 40)
	a := emit.Name(63, flow, strings.Repeat("s", 39)+"a")
	b := emit.Name(63, flow, strings.Repeat("s", 39)+"b")
	for _, n := range []string{a, b} {
		if len(n) > 63 {
			t.Errorf("Name %q has %d characters, want at most 63", n, len(n))
		}
		if errs := content.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("Name %q is not a DNS label: %v", n, errs)
		}
	}
	if a == b {
		t.Errorf("distinct inputs share the name %q", a)
	}
	if again := emit.Name(63, flow, strings.Repeat("s", 39)+"a"); again != a {
		t.Errorf("Name is not deterministic: %q then %q", a, again)
	}
}

func TestNameDoesNotEndInDash(t *testing.T) {
	// The cut falls right after a '-', which must not be left before the hash.
	n := emit.Name(20, "abcdefghij", "klmnopqrst")
	if strings.Contains(n, "--") {
		t.Errorf("Name %q has a double dash", n)
	}
	if len(n) > 20 {
		t.Errorf("Name %q is longer than 20", n)
	}
}

// TestRunName shows that a flow made for a run names its objects apart from
// another run's, the same way every time, and within the length asked for; a
// compile names them as before.
func TestRunName(t *testing.T) {
	compiled := &plan.Flow{Name: "train"}
	if got := emit.RunName(compiled, 63, "train", "prepare"); got != "train-prepare" {
		t.Errorf("without a run: %q, want train-prepare", got)
	}
	a, b := &plan.Flow{Name: "train", Run: "run-a"}, &plan.Flow{Name: "train", Run: "run-b"}
	na, nb := emit.RunName(a, 63, "train", "prepare"), emit.RunName(b, 63, "train", "prepare")
	if na == nb || !strings.HasPrefix(na, "train-prepare-") || len(na) != len("train-prepare-")+emit.RunSuffixLength {
		t.Errorf("runs a and b: %q and %q; want train-prepare-<%d characters of their own>", na, nb, emit.RunSuffixLength)
	}
	if again := emit.RunName(a, 63, "train", "prepare"); again != na {
		t.Errorf("run a named %q, then %q", na, again)
	}
	long := emit.RunName(a, 20, strings.Repeat("x", 30))
	if len(long) > 20 || content.IsDNS1123Label(long) != nil {
		t.Errorf("long name %q: want a DNS label of at most 20 characters", long)
	}
}

// TestPodRunLabel shows that a run's pods carry its label, and compiled pods none.
func TestPodRunLabel(t *testing.T) {
	f := &plan.Flow{Name: "train", Steps: []plan.Step{{Name: "s", Image: "i", Labels: []plan.KeyValue{{Key: plan.LabelStep, Value: "s"}}}}}
	if _, ok := emit.Pod(f, &f.Steps[0], emit.PodOptions{}).Labels[plan.LabelRun]; ok {
		t.Error("a compiled pod carries the run label")
	}
	f.Run = "r1"
	labels := emit.Pod(f, &f.Steps[0], emit.PodOptions{}).Labels
	if labels[plan.LabelRun] != "r1" || labels[plan.LabelStep] != "s" {
		t.Errorf("a run's pod has labels %v; want its step's and %s=r1", labels, plan.LabelRun)
	}
}
