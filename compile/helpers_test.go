package compile_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// img is the image most test flows run.
const img = "registry.example.com/ml/flow:v1"

// Well-known values, spelt out here rather than taken from the code under test.
const (
	neuronKey   = "aws.amazon.com/neuron"
	efaKey      = "vpc.amazonaws.com/efa"
	nvidiaKey   = "nvidia.com/gpu"
	amdKey      = "amd.com/gpu"
	instanceKey = "node.kubernetes.io/instance-type"
)

var (
	neuronTol = plan.Toleration{Key: "aws.amazon.com/neuron", Operator: "Exists", Effect: "NoSchedule"}
	nvidiaTol = plan.Toleration{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}
	amdTol    = plan.Toleration{Key: "amd.com/gpu", Operator: "Exists", Effect: "NoSchedule"}
)

// ignoreDetail compares errors by type and field path, as Kubernetes' validation
// tests do.
var ignoreDetail = cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")

// planOpts compares plans without telling nil from empty slices, which the plan does
// not distinguish.
var planOpts = cmp.Options{cmpopts.EquateEmpty()}

// one returns flow "f" with a single Command step "s" that runs img, plus opts.
func one(opts ...sdk.StepOption) *sdk.Flow {
	return sdk.NewFlow("f").Step("s", append([]sdk.StepOption{sdk.Image(img), sdk.Command("true")}, opts...)...)
}

// stepAt is the path of step name.
func stepAt(name string) *field.Path { return field.NewPath("steps").Key(name) }

// sAt is the path of the field of step "s".
func sAt(fields ...string) *field.Path {
	p := stepAt("s")
	for _, f := range fields {
		p = p.Child(f)
	}
	return p
}

// labels returns the labels Manifold puts on every step, sorted by key.
func labels(flow, step string, extra ...plan.KeyValue) []plan.KeyValue {
	out := []plan.KeyValue{
		{Key: "app.kubernetes.io/name", Value: flow},
		{Key: "app.kubernetes.io/part-of", Value: "manifold"},
		{Key: "manifold.dev/flow", Value: flow},
		{Key: "manifold.dev/step", Value: step},
	}
	return append(out, extra...)
}

// cmdStep is what step "s" of one() compiles to before its own options.
func cmdStep() plan.Step {
	return plan.Step{
		Name:    "s",
		Body:    plan.BodyCommand,
		Command: []string{"true"},
		Image:   img,
		Labels:  labels("f", "s"),
		Nodes:   1,
	}
}

// with returns cmdStep changed by mod.
func with(mod func(*plan.Step)) plan.Step {
	s := cmdStep()
	mod(&s)
	return s
}

// q is a list of quantities.
func q(nameValue ...string) []plan.Quantity {
	var out []plan.Quantity
	for i := 0; i+1 < len(nameValue); i += 2 {
		out = append(out, plan.Quantity{Name: nameValue[i], Value: nameValue[i+1]})
	}
	return out
}

func mustCompile(t *testing.T, f *sdk.Flow, o compile.Options) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(f, o)
	if len(errs) > 0 {
		t.Fatalf("Compile: unexpected errors:\n%v", errs.ToAggregate())
	}
	if p == nil {
		t.Fatal("Compile returned neither a plan nor errors")
	}
	return p
}

// mustStep compiles f and returns its step name.
func mustStep(t *testing.T, f *sdk.Flow, o compile.Options, name string) plan.Step {
	t.Helper()
	p := mustCompile(t, f, o)
	s := p.Step(name)
	if s == nil {
		t.Fatalf("plan has no step %q", name)
	}
	return *s
}

// wantErrs compiles f, expects no plan and exactly want (by type and path), and
// returns what it got.
func wantErrs(t *testing.T, f *sdk.Flow, o compile.Options, want field.ErrorList) field.ErrorList {
	t.Helper()
	p, got := compile.Compile(f, o)
	if p != nil {
		t.Errorf("Compile returned a plan as well as errors: %+v", p)
	}
	if diff := cmp.Diff(want, got, ignoreDetail); diff != "" {
		t.Errorf("errors (-want +got):\n%s\ngot:\n%v", diff, got.ToAggregate())
	}
	return got
}

// wantDetail checks that the i-th error's detail contains s.
func wantDetail(t *testing.T, errs field.ErrorList, i int, s string) {
	t.Helper()
	if s == "" {
		return
	}
	if i >= len(errs) {
		t.Errorf("no error %d to check for %q", i, s)
		return
	}
	if !strings.Contains(errs[i].Detail, s) {
		t.Errorf("error %q: detail %q does not contain %q", errs[i].Field, errs[i].Detail, s)
	}
}

// planText is everything a plan holds, as text, to check that a word appears
// nowhere in it.
func planText(t *testing.T, p *plan.Flow) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ToLower(string(b))
}

func ptr[T any](v T) *T { return &v }
