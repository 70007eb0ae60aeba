package e2e_test

import (
	"context"
	"slices"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/sdk"
)

// TestScheduledAccepted creates the output of scheduled flows on the API server,
// with strict field validation: the job target's CronJob (of a one-step flow)
// and the argo target's WorkflowTemplate and CronWorkflow, in both
// argo_multi_node modes for a flow with a multi-node step, and with them the
// ConfigMap of a flow whose values hold "{{". Nothing runs: the
// schedule is hours away. The examples' own outputs are created (and run) by
// TestExamples.
func TestScheduledAccepted(t *testing.T) {
	c := simcluster.Shared(t)
	nightly := sdk.NewFlow("nightly", sdk.Image("registry.example.com/report:v1"), sdk.Schedule("0 3 * * *")).
		Step("report", sdk.Command("report"), sdk.CPU("1"))
	train := sdk.NewFlow("weekly-train", sdk.Image("registry.example.com/ml/train:v1"), sdk.Schedule("0 4 * * 0"),
		sdk.Param("epochs", "3")).
		Step("prepare", sdk.Command("prepare")).
		Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py"), sdk.Nodes(2),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Retry(1))
	// "{{" in every value the argo target carries, on a single-node step and a
	// multi-node one: its ConfigMap is created too, as it is for a flow with
	// params (weekly-train), whose runs may be given values holding "{{".
	braced := sdk.NewFlow("braced", sdk.Image("registry.example.com/ml/train:v1"), sdk.Schedule("0 5 * * *"),
		sdk.Param("note", "{{ note }}")).
		Step("prepare", sdk.Command("prepare", "{{workflow.name}}"), sdk.Env("V", "$(MANIFOLD_PARAM_NOTE){{x}}"), sdk.Foreach("{{item}}", "b")).
		Step("train", sdk.After("prepare"), sdk.Command("torchrun", "{{ x }}"), sdk.Env("V", "{{"), sdk.Nodes(2),
			sdk.Foreach("{{a}}", "b"), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8))
	cases := []struct {
		name   string
		flow   *sdk.Flow
		mode   string
		target emit.Target
		kinds  []string
	}{
		{"nightly/job", nightly, "", job.Target{}, []string{"CronJob"}},
		{"nightly/argo", nightly, "", argo.Target{}, []string{"WorkflowTemplate", "CronWorkflow"}},
		{"weekly-train/argo", train, "", argo.Target{}, []string{"WorkflowTemplate", "CronWorkflow", "ConfigMap"}},
		{"weekly-train/argo-job", train, "job", argo.Target{}, []string{"WorkflowTemplate", "CronWorkflow", "ConfigMap"}},
		{"braced/argo", braced, "", argo.Target{}, []string{"WorkflowTemplate", "CronWorkflow", "ConfigMap"}},
		{"braced/argo-job", braced, "job", argo.Target{}, []string{"WorkflowTemplate", "CronWorkflow", "ConfigMap"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, errs := compile.Compile(tc.flow, compile.Options{Config: compile.Config{ArgoMultiNode: tc.mode}})
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			files, errs := emit.Files(tc.target, p)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			ns := c.Namespace(t)
			var kinds []string
			for _, f := range files {
				objs, err := simcluster.Decode(f.Data)
				if err != nil {
					t.Fatalf("%s: %v", f.Name, err)
				}
				for _, o := range objs {
					if _, err := c.Create(context.Background(), o, ns); err != nil {
						t.Errorf("the API server refused %s: %v", f.Name, err)
					}
					kinds = append(kinds, o.GetKind())
				}
			}
			if !slices.Equal(kinds, tc.kinds) {
				t.Errorf("created %v, want %v", kinds, tc.kinds)
			}
		})
	}
}
