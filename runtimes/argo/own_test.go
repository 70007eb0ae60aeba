package argo_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDeployLeavesOthersObjects: a WorkflowTemplate and a CronWorkflow of the
// flow's name that another field manager made, without the flow's deployed
// labels, are not applied over: deploy refuses, naming the object and its
// field manager, and changes nothing; undeploy leaves them. Only with
// TakeOver does deploy take them over, after which undeploy deletes them.
func TestDeployLeavesOthersObjects(t *testing.T) {
	c := simcluster.Shared(t)
	ctx := context.Background()
	flow := sdk.NewFlow("argo-foreign", sdk.Image("example.com/flow:v1"), sdk.Schedule("0 3 * * *")).
		Step("a", sdk.Command("echo", "a"))
	for _, tc := range []struct {
		kind string
		gvr  schema.GroupVersionResource
		spec map[string]any
	}{
		{"WorkflowTemplate", argo.WorkflowTemplateGVR, map[string]any{
			"entrypoint": "main",
			"templates":  []any{map[string]any{"name": "main", "container": map[string]any{"image": "example.com/theirs:v1"}}},
		}},
		{"CronWorkflow", argo.CronWorkflowGVR, map[string]any{
			"schedules": []any{"0 1 * * *"},
			"workflowSpec": map[string]any{
				"entrypoint": "main",
				"templates":  []any{map[string]any{"name": "main", "container": map[string]any{"image": "example.com/theirs:v1"}}},
			},
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := c.Namespace(t)
			res := c.Dynamic.Resource(tc.gvr).Namespace(ns)
			theirs := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": tc.gvr.GroupVersion().String(), "kind": tc.kind,
				"metadata": map[string]any{"name": "argo-foreign", "labels": map[string]any{"team": "theirs"}},
				"spec":     tc.spec,
			}}
			made, err := res.Create(ctx, theirs, metav1.CreateOptions{FieldManager: "their-tool"})
			if err != nil {
				t.Fatal(err)
			}
			o := argo.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Root: t.TempDir()}
			a, err := argo.Connect(ctx, compileFlow(t, flow), o)
			if err != nil {
				t.Fatal(err)
			}
			for _, dry := range []bool{true, false} {
				done, err := a.Deploy(ctx, dry)
				if err == nil {
					t.Fatalf("deploy (dry run %t) over another's %s: %v; want it refused", dry, tc.kind, done)
				}
				for _, want := range []string{tc.kind + " argo-foreign in namespace " + ns, "their-tool", "--take-over"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			}
			if now, err := res.Get(ctx, "argo-foreign", metav1.GetOptions{}); err != nil || now.GetResourceVersion() != made.GetResourceVersion() {
				t.Errorf("the refused deploy changed another's %s: %v", tc.kind, err)
			}
			if wts, err := c.Dynamic.Resource(argo.WorkflowTemplateGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil || tc.kind == "CronWorkflow" && len(wts.Items) > 0 {
				t.Errorf("the refused deploy applied something: %v", err)
			}
			if done, err := a.Undeploy(ctx, false); err != nil || len(done) > 0 {
				t.Errorf("undeploy of a flow never deployed: %v, %v; want nothing deleted", done, err)
			}
			if _, err := res.Get(ctx, "argo-foreign", metav1.GetOptions{}); err != nil {
				t.Fatalf("undeploy deleted another's %s: %v", tc.kind, err)
			}

			// Taken over, it is the flow's: updated by deploy, deleted by undeploy.
			o.TakeOver = true
			b, err := argo.Connect(ctx, compileFlow(t, flow), o)
			if err != nil {
				t.Fatal(err)
			}
			done, err := b.Deploy(ctx, false)
			if err != nil {
				t.Fatalf("deploy with TakeOver: %v", err)
			}
			var got []string
			for _, d := range done {
				got = append(got, d.String())
			}
			if want := strings.ToLower(tc.kind) + "/argo-foreign updated"; !slices.Contains(got, want) {
				t.Errorf("deploy with TakeOver: %q; want %q", got, want)
			}
			if _, err := a.Undeploy(ctx, false); err != nil {
				t.Fatal(err)
			}
			if _, err := res.Get(ctx, "argo-foreign", metav1.GetOptions{}); err == nil {
				t.Errorf("undeploy left the %s deploy took over", tc.kind)
			}
		})
	}
}
