package argo_test

import (
	"bytes"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func mustCompile(t testing.TB, f *sdk.Flow) *plan.Flow {
	t.Helper()
	return testflows.Compile(t, f)
}

func workflowTemplate(t *testing.T, f *sdk.Flow) *wfv1.WorkflowTemplate {
	t.Helper()
	wt, errs := argo.WorkflowTemplate(mustCompile(t, f))
	if len(errs) > 0 {
		t.Fatalf("WorkflowTemplate: %v", errs.ToAggregate())
	}
	return wt
}

// writeArgo compiles f, emits it, and writes the YAML to dir/name.yaml.
func writeArgo(t *testing.T, f *sdk.Flow, dir, name string) string {
	t.Helper()
	return testflows.Write(t, argo.Target{}, f, dir, name)
}

func neuronFlow() *sdk.Flow {
	return sdk.NewFlow("neuron-train", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule")).
		Step("evaluate", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("train"), sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1)).
		Step("prepare", sdk.Command("true")).
		Step("train", sdk.Image("example.com/neuron:v1"), sdk.Command("torchrun", "train.py"), sdk.After("prepare"),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(6*time.Hour))
}

func foreachFlow() *sdk.Flow {
	return sdk.NewFlow("fan", sdk.Image("busybox"), sdk.Param("p", "false")).
		Step("split", sdk.Command("true")).
		Step("work", sdk.Command("true"), sdk.After("split"), sdk.Foreach("a", "yes", "0123")).
		Step("join", sdk.Command("true"), sdk.After("work"))
}

// decodeTemplate decodes, refusing unknown fields, the WorkflowTemplate that
// follows the header comment of an emitted file.
func decodeTemplate(t *testing.T, data []byte) *wfv1.WorkflowTemplate {
	t.Helper()
	docs := bytes.Split(data, []byte("\n---\n"))
	if len(docs) < 2 {
		t.Fatalf("no document after the header:\n%s", data)
	}
	var wt wfv1.WorkflowTemplate
	if err := yaml.UnmarshalStrict(docs[1], &wt); err != nil {
		t.Fatalf("%v\n%s", err, docs[1])
	}
	return &wt
}
