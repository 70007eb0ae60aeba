package argo

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// TestAloneIsTheDocumentsSize checks that the size alone reads from a
// template's or task's text in the one WorkflowTemplate is the size of its
// own YAML document, for flows with long values (folded in one place and not
// the other, and lines past the 80th column that no space lets fold: K's
// value, an EFA step's PATH, a multi-node step's JSON manifest), multi-line values (literal blocks, with empty lines), "{{"
// carried, foreach items and both ways of running multi-node steps; and that
// most items are read so, not measured again.
func TestAloneIsTheDocumentsSize(t *testing.T) {
	long := strings.Repeat("word ", 30)
	odd := sdk.NewFlow("odd", sdk.Image("busybox"), sdk.Param("p", "{{x}} "+long)).
		Step("a", sdk.Command("sh", "-c", "echo one\n\n  two\nthree "+long), sdk.Env("LONG", long), sdk.Env("K", strings.Repeat("x", 90))).
		Step("b", sdk.Command("echo", strings.Repeat("y", 75)+" z"), sdk.After("a"), sdk.Foreach("{{z}}", long, "w")).
		Step("c", sdk.Command("true"), sdk.After("b"), sdk.Nodes(2), sdk.Foreach("1", "2")).
		Step("d", sdk.Command("sh", "-c", "echo one\n\n  two\n"), sdk.After("c"))
	flows := []*plan.Flow{testflows.Compile(t, odd), testflows.Compile(t, benchflow.Flow(benchflow.FanOut, 60, benchflow.Options{}))}
	job := *testflows.Compile(t, benchflow.Flow(benchflow.Chain, 60, benchflow.Options{}))
	job.ArgoMultiNode = plan.ArgoJob
	flows = append(flows, &job)
	for _, f := range flows {
		read, all := 0, 0
		var errs field.ErrorList
		m := newMaker(f, f.Name, nil, RunID, false)
		var walkErr error
		measure := func(_ int, obj any, text []byte, folded bool) {
			all++
			want, err := size(obj)
			if err != nil {
				walkErr = err
			}
			if n, ok := alone(text, folded); ok {
				read++
				if n != want {
					t.Errorf("%s: alone gives %d bytes, the document is %d:\n%s", f.Name, n, want, text)
				}
			}
		}
		if _, err := costsOf(m, &errs, measure); err != nil || walkErr != nil || len(errs) > 0 {
			t.Fatal(err, walkErr, errs)
		}
		if read == 0 || read == all && f.Name == "odd" {
			t.Errorf("%s: %d of %d items read from their text; want most, not all, for a flow with long values", f.Name, read, all)
		}
		t.Logf("%s: %d of %d items read from their text", f.Name, read, all)
	}
}
