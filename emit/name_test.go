package emit_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/manifoldflow/manifold/emit"
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
