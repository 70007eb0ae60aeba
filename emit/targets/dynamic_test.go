package targets_test

import (
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDynamicFlowRefused: the static targets say they cannot take a flow
// that fans out over, or branches on, a run-time value, naming each such
// step's field and why. The engines run such a flow: emit/argo's TestDynamic*
// and emit/airflow's tests.
func TestDynamicFlowRefused(t *testing.T) {
	f := sdk.NewFlow("dyn", sdk.Image("registry.example.com/dyn:v1")).
		Step("list", sdk.Command("list")).
		Step("each", sdk.Command("each"), sdk.ForeachOf("list", "shards")).
		Step("big", sdk.Command("big"), sdk.When("list", "size", "big"))
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := map[string]string{
		"job":    "writes static manifests",
		"jobset": "writes static manifests",
	}
	for _, tg := range targets.All() {
		if _, ok := want[tg.Name()]; !ok {
			continue
		}
		_, errs := emit.Files(tg, p)
		got := map[string]string{}
		for _, e := range errs {
			got[e.Field] = e.Error()
		}
		for _, field := range []string{"steps[each].foreachOf", "steps[big].when"} {
			if !strings.Contains(got[field], want[tg.Name()]) {
				t.Errorf("%s: at %s got %q, want it to hold %q (all: %v)", tg.Name(), field, got[field], want[tg.Name()], errs)
			}
		}
	}
}
