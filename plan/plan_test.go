package plan_test

import (
	"slices"
	"testing"

	"github.com/manifoldflow/manifold/plan"
)

func TestParamEnv(t *testing.T) {
	for name, want := range map[string]string{
		"epochs":        "MANIFOLD_PARAM_EPOCHS",
		"learning-rate": "MANIFOLD_PARAM_LEARNING_RATE",
		"Batch_Size":    "MANIFOLD_PARAM_BATCH_SIZE",
	} {
		if got := plan.ParamEnv(name); got != want {
			t.Errorf("ParamEnv(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestLookups(t *testing.T) {
	f := &plan.Flow{Params: []plan.Param{{Name: "p"}}, Steps: []plan.Step{{Name: "a"}, {Name: "b"}}}
	if s := f.Step("b"); s == nil || s != &f.Steps[1] {
		t.Errorf("Step(b) = %v", s)
	}
	if f.Step("c") != nil || f.Param("q") != nil || f.Param("p") != &f.Params[0] {
		t.Error("lookups of missing names must return nil, of present ones the element")
	}
}

func TestPublished(t *testing.T) {
	f := &plan.Flow{Steps: []plan.Step{
		{Name: "list"},
		{Name: "each", ForeachOf: &plan.ValueRef{Step: "list", Name: "shards"}},
		{Name: "big", When: &plan.Condition{Ref: plan.ValueRef{Step: "list", Name: "size"}, Value: `"big"`}},
		{Name: "again", ForeachOf: &plan.ValueRef{Step: "list", Name: "shards"}},
	}}
	if got := f.Published("list"); !slices.Equal(got, []string{"shards", "size"}) {
		t.Errorf("Published(list) = %v", got)
	}
	if got := f.Published("each"); got != nil {
		t.Errorf("Published(each) = %v", got)
	}
}
