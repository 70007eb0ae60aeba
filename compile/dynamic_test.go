package compile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDynamicPlan: ForeachOf and When land in the plan, and the step waits for
// the step that puts the value, given After or not.
func TestDynamicPlan(t *testing.T) {
	f := sdk.NewFlow("dyn", sdk.Image(img)).
		Step("list", sdk.Command("list")).
		Step("each", sdk.Command("each"), sdk.ForeachOf("list", "shards")).
		Step("pick", sdk.Command("pick"), sdk.After("each")).
		Step("big", sdk.Command("big"), sdk.When("pick", "size", "big"), sdk.After("pick")).
		Step("odd", sdk.Command("odd"), sdk.When("pick", "n", 3))
	p := mustCompile(t, f, compile.Options{})
	step := func(name string) *plan.Step {
		i := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Name == name })
		return &p.Steps[i]
	}
	if s := step("each"); s.ForeachOf == nil || *s.ForeachOf != (plan.ValueRef{Step: "list", Name: "shards"}) || !slices.Equal(s.After, []string{"list"}) || s.Foreach != nil {
		t.Errorf("each: ForeachOf %v, After %q, Foreach %q", s.ForeachOf, s.After, s.Foreach)
	}
	if s := step("big"); s.When == nil || s.When.Value != `"big"` || !slices.Equal(s.After, []string{"pick"}) {
		t.Errorf("big: When %v, After %q", s.When, s.After)
	}
	if s := step("odd"); s.When == nil || s.When.Value != `3` || !slices.Equal(s.After, []string{"pick"}) {
		t.Errorf("odd: When %v, After %q", s.When, s.After)
	}
	if p.Dynamic() == nil || !step("each").FansOut() || step("pick").Dynamic() {
		t.Error("Dynamic and FansOut do not tell the dynamic steps")
	}
}

// TestDynamicErrors: each mistake is named by its field, with what to do.
func TestDynamicErrors(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []sdk.StepOption
		field, in string
	}{
		{"unknown step", []sdk.StepOption{sdk.ForeachOf("lst", "shards")}, "steps[s].foreachOf.step", "did you mean list?"},
		{"itself", []sdk.StepOption{sdk.When("s", "x", "a")}, "steps[s].when.step", "cannot read a value it puts itself"},
		{"bad name", []sdk.StepOption{sdk.ForeachOf("list", "../x")}, "steps[s].foreachOf.name", "letters, digits"},
		{"list value", []sdk.StepOption{sdk.When("list", "x", []string{"a"})}, "steps[s].when.value", "compares with one value"},
		{"no JSON", []sdk.StepOption{sdk.When("list", "x", func() {})}, "steps[s].when.value", "no JSON encoding"},
		{"nested", []sdk.StepOption{sdk.ForeachOf("fan", "x")}, "steps[s].foreachOf.step", "nested fan-out is not taken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sdk.NewFlow("dyn", sdk.Image(img)).
				Step("list", sdk.Command("list")).
				Step("fan", sdk.Command("fan"), sdk.Foreach("a", "b")).
				Step("s", append([]sdk.StepOption{sdk.Command("s")}, tc.opts...)...)
			_, errs := compile.Compile(f, compile.Options{})
			for _, e := range errs {
				if e.Field == tc.field && strings.Contains(e.Error(), tc.in) {
					return
				}
			}
			t.Errorf("want an error at %s holding %q, got %v", tc.field, tc.in, errs)
		})
	}
}
