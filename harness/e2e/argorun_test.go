package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// Argo's label on the pods of a Workflow, naming it.
const labelWorkflow = "workflows.argoproj.io/workflow"

// workflowRun is what happened when a flow's WorkflowTemplate was submitted as
// a Workflow: the Workflow's phase and uid, and the steps as a jobRun, with
// created and done being when Argo started and finished each step's node
// (whole seconds, as Argo records them).
type workflowRun struct {
	*jobRun
	name, uid, phase string
}

// prepareLiterals creates, in namespace ns, the ConfigMaps among objs, as a
// user applies <flow>.literals.yaml beside the WorkflowTemplate: the one its
// steps' containers read "{{" from.
func prepareLiterals(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	createKind(t, c, ns, objs, "ConfigMap")
}

// runWorkflow creates the WorkflowTemplate of objs (argo target output) in ns,
// with the PersistentVolumeClaims, ResourceClaimTemplates and ConfigMap it needs,
// submits a Workflow that refers to it, and waits until Argo's controller ends
// the Workflow (simcluster.RunFromTemplate).
func runWorkflow(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) *workflowRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wt *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "WorkflowTemplate" {
			wt = o
		}
	}
	if wt == nil {
		t.Fatal("argo target output holds no WorkflowTemplate")
	}
	preparePVCs(t, c, ns, templatePods(t, wt))
	prepareClaims(t, c, ns, objs)
	prepareLiterals(t, c, ns, objs)
	if _, err := c.Create(ctx, wt, ns); err != nil {
		t.Fatalf("the API server refused the WorkflowTemplate: %v", err)
	}
	wf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"generateName": wt.GetName() + "-"},
		"spec":       map[string]any{"workflowTemplateRef": map[string]any{"name": wt.GetName()}},
	}}
	ended, err := c.RunFromTemplate(ctx, ns, wf)
	if err != nil {
		t.Fatal(err)
	}
	r := &workflowRun{name: ended.GetName(), uid: string(ended.GetUID()), jobRun: &jobRun{
		created: map[string]time.Time{}, done: map[string]time.Time{},
		failed: map[string]string{}, pending: map[string]string{}, restarts: map[string]int{},
		pods: map[string][]corev1.Pod{}, nodeType: nodeTypes(t, c),
	}}
	var status struct {
		Phase string `json:"phase"`
		Nodes map[string]struct {
			DisplayName string      `json:"displayName"`
			Type        string      `json:"type"`
			Phase       string      `json:"phase"`
			Message     string      `json:"message"`
			StartedAt   metav1.Time `json:"startedAt"`
			FinishedAt  metav1.Time `json:"finishedAt"`
		} `json:"nodes"`
	}
	if st, ok := ended.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &status); err != nil {
			t.Fatalf("Workflow %s status: %v", r.name, err)
		}
	}
	r.phase = status.Phase
	// A step is a node of type Pod (a foreach step, one per item, under a
	// TaskGroup node named after the task; with argo_multi_node = "job", a
	// multi-node step's Service task too); the step started with its first pod
	// and finished with its last.
	steps := map[string]bool{}
	for _, n := range status.Nodes {
		if n.Type != "Pod" || n.StartedAt.IsZero() {
			continue
		}
		task, _, _ := strings.Cut(n.DisplayName, "(")
		s := argo.StepOfTask(task)
		steps[s] = true
		if at, ok := r.created[s]; !ok || n.StartedAt.Time.Before(at) {
			r.created[s] = n.StartedAt.Time
		}
		switch n.Phase {
		case "Succeeded":
			if n.FinishedAt.Time.After(r.done[s]) {
				r.done[s] = n.FinishedAt.Time
			}
		case "Failed", "Error":
			r.failed[s] = n.Phase + ": " + n.Message
		}
	}
	for s := range steps {
		if r.failed[s] != "" {
			delete(r.done, s)
		}
		r.order = append(r.order, s)
		r.pods[s] = stepPods(ctx, t, c, ns, s)
	}
	return r
}

// templatePods returns, for preparePVCs, a Job per template of the
// WorkflowTemplate wt that mounts volumes, holding those volumes.
func templatePods(t *testing.T, wt *unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	tpls, _, _ := unstructured.NestedSlice(wt.Object, "spec", "templates")
	var out []*unstructured.Unstructured
	for _, tpl := range tpls {
		vols, ok, _ := unstructured.NestedSlice(tpl.(map[string]any), "volumes")
		if !ok {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: map[string]any{
			"kind":     "Job",
			"metadata": map[string]any{"name": wt.GetName()},
			"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"volumes": vols}}},
		}})
	}
	return out
}

// resourceManifests writes the argo target output objs to a file and returns
// the objects its resource templates create in a run with uid, as Argo's own
// code substitutes them (tools/argolint -manifests), grouped by step.
func resourceManifests(t *testing.T, objs []*unstructured.Unstructured, uid string) map[string][]*unstructured.Unstructured {
	t.Helper()
	var docs []any
	for _, o := range objs {
		docs = append(docs, o.Object)
	}
	data, err := encode.YAML("argo target output", docs...)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "flow.argo.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, ok := argolint.Manifests(t, uid, file)
	if !ok {
		t.Fatalf("argolint -manifests: %s", out)
	}
	manifests, err := simcluster.Decode([]byte(out))
	if err != nil {
		t.Fatalf("argolint -manifests: %v\n%s", err, out)
	}
	byStep := map[string][]*unstructured.Unstructured{}
	for _, m := range manifests {
		s := m.GetLabels()[plan.LabelStep]
		if s == "" {
			t.Fatalf("resource manifest %s %s has no %s label", m.GetKind(), m.GetName(), plan.LabelStep)
		}
		byStep[s] = append(byStep[s], m)
	}
	return byStep
}
