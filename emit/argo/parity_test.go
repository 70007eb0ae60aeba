package argo_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/sdk"
)

// parityFlows use every pod option, in combinations that make some fields shared by
// every step and others differ, so that both the workflow-level form and the
// per-template form are compared.
func parityFlows() map[string]*sdk.Flow {
	return map[string]*sdk.Flow{
		"neuron":       neuronFlow(),
		"every-option": testflows.EveryOption(),
		"foreach":      foreachFlow(),
		// Steps that differ in pull secrets: Argo has no template field for them.
		"pull-secrets": sdk.NewFlow("pull", sdk.Image("busybox")).
			Step("a", sdk.Command("true"), sdk.ImagePullSecret("one")).
			Step("b", sdk.Command("true"), sdk.ImagePullSecret("two"), sdk.ImagePullSecret("three")).
			Step("c", sdk.Command("true")),
		// "{{" in every value the target carries: the kubelet gives the
		// container the value's own bytes.
		"literals": literalFlow(),
		// One step: nothing is shared.
		"single": sdk.NewFlow("single", sdk.Param("p", "v")).
			Step("only", sdk.Image("busybox"), sdk.Command("true"), sdk.Foreach("x")),
		// An artifact volume: every step's pod mounts it and gets the store's
		// variables, the run ID being the workflow's name.
		"artifact-volume": sdk.NewFlow("shared", sdk.Image("busybox"), sdk.Param("p", "v"), sdk.ArtifactVolume("shared-artifacts")).
			Step("put", sdk.Run(func(*sdk.Context) error { return nil }), sdk.Volume("data", "/data")).
			Step("fan", sdk.After("put"), sdk.Command("sh", "-c", "ls $MANIFOLD_ARTIFACTS"), sdk.Foreach("a", "b")).
			Step("get", sdk.After("fan"), sdk.Run(func(*sdk.Context) error { return nil })),
	}
}

// TestPodParity: for every step (and every item of a foreach step) of every flow
// the lint test checks, the pod Argo's controller would build from the
// WorkflowTemplate is the Job target's pod.
//
// Allowed differences, which argopod.Resolve does not model because Argo adds them
// for its executor and no other target has them: the init and wait containers,
// the var-run-argo and tmp-dir-argo volumes and mounts, the argoexec prefix of the
// command, ARGO_* variables and Argo's own pod labels and annotations. The one
// difference of Manifold's own is Kueue's labels of a queued step, which are on
// the pod that Argo creates bare and on the Job that the job target makes. Empty and
// absent lists compare equal, since both serialize to nothing. A flow whose values
// hold "{{" has its container compared as the kubelet fills it in
// (argopod.Expanded): the same bytes reach the process.
func TestPodParity(t *testing.T) {
	for name, f := range lintFlows() {
		t.Run(name, func(t *testing.T) {
			p := mustCompile(t, f)
			wt, errs := argo.WorkflowTemplate(p)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			compared := 0
			for i := range p.Steps {
				s := &p.Steps[i]
				for item, j := range job.Jobs(p, s) {
					got, err := argopod.Resolve(wt, argo.TaskName(s.Name), item)
					if err != nil {
						t.Fatalf("step %s: %v", s.Name, err)
					}
					want := *j.Spec.Template.DeepCopy()
					// Argo creates a single-node step's pod bare, so Kueue admits
					// the pod itself, by the labels the Job carries on the job target.
					want.Labels = emit.Queued(want.Labels, s)
					argopod.RunIDs(t, fmt.Sprintf("step %s item %d", s.Name, item), &want, &got)
					if cm := argo.Literals(p); cm != nil {
						// Values holding "{{" are written otherwise; the same
						// bytes reach the container.
						want.Spec.Containers[0], err = argopod.Expanded(want.Spec.Containers[0])
						if err == nil {
							got.Spec.Containers[0], err = argopod.Expanded(got.Spec.Containers[0], cm)
						}
						if err != nil {
							t.Fatalf("step %s: %v", s.Name, err)
						}
					}
					if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), argopod.Untraced); diff != "" {
						t.Errorf("step %s item %d: Argo's pod differs from the Job's (-job +argo):\n%s", s.Name, item, diff)
					}
					compared++
				}
			}
			if compared == 0 {
				t.Fatal("no pods compared")
			}
		})
	}
}

// TestParityCheckCanFail: a template that loses a field it needs is caught.
func TestParityCheckCanFail(t *testing.T) {
	p := mustCompile(t, neuronFlow())
	wt, errs := argo.WorkflowTemplate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range wt.Spec.Templates {
		if wt.Spec.Templates[i].Name == "prepare" {
			wt.Spec.Templates[i].Tolerations = nil // loses the flow's dedicated toleration
		}
	}
	got, err := argopod.Resolve(wt, "prepare", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := job.Jobs(p, p.Step("prepare"))[0].Spec.Template
	if cmp.Equal(want, got, cmpopts.EquateEmpty()) {
		t.Fatal("a template that inherits the wrong tolerations resolved to the Job's pod")
	}
	if !strings.Contains(cmp.Diff(want, got, cmpopts.EquateEmpty()), "dedicated") {
		t.Errorf("the difference is not the toleration:\n%s", cmp.Diff(want, got))
	}
}
