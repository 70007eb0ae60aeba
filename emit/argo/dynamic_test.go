package argo_test

import (
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// dynamicFlow is a fan-out over a Command step's list, a branch on a value of
// every hostile kind, and a join after the branches, with a store.
func dynamicFlow() *sdk.Flow {
	return sdk.NewFlow("dyn", sdk.Image("busybox"), sdk.ArtifactVolume("art")).
		Step("list-2", sdk.Command("true")).
		Step("each", sdk.ForeachOf("list-2", "items"), sdk.Command("true"), sdk.Retry(1)).
		Step("big", sdk.When("list-2", "size", `{{workflow.name}} }} ' " \ $(X) $$ ✓`), sdk.After("each"), sdk.Command("true")).
		Step("small", sdk.When("list-2", "size", 3), sdk.After("each"), sdk.Command("true")).
		Step("join", sdk.After("big", "small"), sdk.Command("true")).
		Step("after-join", sdk.After("join"), sdk.Command("true")).
		Step("mixed", sdk.After("big", "list-2"), sdk.Command("true"))
}

func tasksByName(wt *wfv1.WorkflowTemplate) map[string]wfv1.DAGTask {
	out := map[string]wfv1.DAGTask{}
	for _, tk := range wt.Spec.Templates[0].DAG.Tasks {
		out[tk.Name] = tk
	}
	return out
}

// TestDynamicTasks: the fan-out runs withParam over the indexes of the
// producer's output, its items' arguments are expressions, a branch's when
// compares its value written as \u escapes (no quote, "{{", "}}" or "$" of
// the value in the text), and depends makes a join wait only for the branch
// taken, and a step waiting only for branches not taken not taken.
func TestDynamicTasks(t *testing.T) {
	wt := workflowTemplate(t, dynamicFlow())
	tasks := tasksByName(wt)
	each := tasks["each"]
	count := `len(fromJSON(tasks['list-2'].outputs.parameters['items']))`
	if !strings.HasPrefix(each.WithParam, "{{="+count+" > 5000 ? 'step each fans out over more than 5000 items") ||
		!strings.HasSuffix(each.WithParam, " : toJson(0..("+count+"-1))}}") {
		t.Errorf("each withParam %q", each.WithParam)
	}
	if got := each.Arguments.GetParameterByName(argo.InputIndex); got == nil || got.Value.String() != "{{item}}" {
		t.Errorf("each index argument %v", got)
	}
	big := tasks["big"].When
	if !strings.HasPrefix(big, "{{=fromJSON(tasks['list-2'].outputs.parameters['size']) == fromJSON('") {
		t.Errorf("big when %q", big)
	}
	inner := strings.TrimSuffix(strings.TrimPrefix(big, "{{="), "}}")
	for _, bad := range []string{"{{", "}}", "$", `"`, `\\`, "name}"} {
		if strings.Contains(inner[strings.Index(inner, "== "):], bad) {
			t.Errorf("big's when holds %q of its value: %q", bad, big)
		}
	}
	want := map[string]string{
		"each":       "list-2",
		"big":        "each && list-2",
		"join":       "(big.Succeeded || big.Skipped || big.Omitted) && (small.Succeeded || small.Skipped || small.Omitted) && (big.Succeeded || small.Succeeded)",
		"after-join": "(join.Succeeded || join.Skipped || join.Omitted) && (join.Succeeded)",
		"mixed":      "(big.Succeeded || big.Skipped || big.Omitted) && (list-2.Succeeded || list-2.Skipped || list-2.Omitted)",
	}
	for name, w := range want {
		if got := tasks[name].Depends; got != w {
			t.Errorf("%s depends %q, want %q", name, got, w)
		}
	}
	for _, tpl := range wt.Spec.Templates {
		switch tpl.Name {
		case "list-2":
			if len(tpl.Outputs.Parameters) != 2 || tpl.Outputs.Parameters[0].ValueFrom.Path != plan.ValuesPath+"/items.json" {
				t.Errorf("list-2 outputs %v", tpl.Outputs.Parameters)
			}
		case "each":
			if tpl.RetryStrategy == nil || tpl.RetryStrategy.Limit.IntValue() != 1 {
				t.Errorf("each retryStrategy %v", tpl.RetryStrategy)
			}
		}
	}
}

// TestDynamicAcceptedByArgoLint: Argo's validator takes the dynamic flow's
// WorkflowTemplate (the API server takes it in runtimes/argo's
// TestDynamicValuesReachPods, which deploys it).
func TestDynamicAcceptedByArgoLint(t *testing.T) {
	path := writeArgo(t, dynamicFlow(), t.TempDir(), "dyn")
	if out, ok := argolint.Run(t, path); !ok {
		t.Errorf("Argo's validator refuses the dynamic flow:\n%s", out)
	}
}

// TestDynamicRefused: what the argo target cannot take of a dynamic flow is
// named with its step and field.
func TestDynamicRefused(t *testing.T) {
	noStore := sdk.NewFlow("d", sdk.Image("busybox")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.ForeachOf("a", "items"), sdk.Command("true"))
	dotted := sdk.NewFlow("d", sdk.Image("busybox"), sdk.ArtifactVolume("art")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.ForeachOf("a", "my.items"), sdk.Command("true"))
	both := sdk.NewFlow("d", sdk.Image("busybox"), sdk.ArtifactVolume("art")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.ForeachOf("a", "items"), sdk.When("a", "go", true), sdk.Command("true"))
	runOverCommand := func(store sdk.FlowOption) *sdk.Flow {
		return sdk.NewFlow("d", sdk.Image("busybox"), store).
			Step("a", sdk.Command("true")).
			Step("b", sdk.ForeachOf("a", "items"), sdk.Run(func(*sdk.Context) error { return nil }))
	}
	if _, errs := argo.WorkflowTemplate(mustCompile(t, runOverCommand(sdk.ArtifactVolume("art")))); len(errs) > 0 {
		t.Errorf("a Run step over a Command step's list with a volume store: %v", errs)
	}
	s3 := mustCompile(t, runOverCommand(sdk.Param("x", "y")))
	s3.Artifacts = &plan.Artifacts{URL: "s3://bucket/flows"}
	_, errs := argo.WorkflowTemplate(s3)
	want := field.ErrorList{field.Invalid(field.NewPath("steps").Key("b").Child("foreachOf").Child("step"), "a", "")}
	if diff := cmp.Diff(want, errs, cmpopts.IgnoreFields(field.Error{}, "Detail")); diff != "" {
		t.Errorf("a Run step over a Command step's list in S3: errors (-want +got):\n%s", diff)
	}
	for name, tc := range map[string]struct {
		flow *sdk.Flow
		want field.ErrorList
	}{
		"no store": {noStore, field.ErrorList{field.Required(field.NewPath("steps").Key("b").Child("foreachOf"), "")}},
		"dotted":   {dotted, field.ErrorList{field.Invalid(field.NewPath("steps").Key("a"), "my.items", "")}},
		"both":     {both, field.ErrorList{field.Invalid(field.NewPath("steps").Key("b").Child("when"), "true", "")}},
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := argo.WorkflowTemplate(mustCompile(t, tc.flow))
			if diff := cmp.Diff(tc.want, errs, cmpopts.IgnoreFields(field.Error{}, "Detail", "BadValue")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
