package compile_test

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

// TestTaskLimit: a flow of more tasks (steps and foreach items) than a run's
// record holds is refused at steps; one of exactly that many compiles.
func TestTaskLimit(t *testing.T) {
	items := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strconv.Itoa(i)
		}
		return out
	}
	at := sdk.NewFlow("f", sdk.Image(img)).
		Step("a", sdk.Command("true")).
		Step("fan", sdk.Command("true"), sdk.Foreach(items(100_000-1)...))
	if _, errs := compile.Compile(at, compile.Options{}); len(errs) > 0 {
		t.Errorf("a flow of 100000 tasks: %v", errs.ToAggregate())
	}
	over := sdk.NewFlow("f", sdk.Image(img)).
		Step("a", sdk.Command("true"), sdk.Foreach(items(60_000)...)).
		Step("b", sdk.Command("true"), sdk.Foreach(items(40_001)...))
	_, errs := compile.Compile(over, compile.Options{})
	want := field.ErrorList{field.Invalid(field.NewPath("steps"), nil, "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("a flow of 100001 tasks (-want +got):\n%s", diff)
	}
}

// TestRetryLimit: sdk.Retry takes up to 10000 retries.
func TestRetryLimit(t *testing.T) {
	for n, ok := range map[int]bool{0: true, 10_000: true, 10_001: false, -1: false} {
		f := sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true"), sdk.Retry(n))
		_, errs := compile.Compile(f, compile.Options{})
		var want field.ErrorList
		if !ok {
			want = field.ErrorList{field.Invalid(field.NewPath("steps").Key("a").Child("retry"), nil, "")}
		}
		if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
			t.Errorf("Retry(%d) (-want +got):\n%s", n, diff)
		}
	}
}
