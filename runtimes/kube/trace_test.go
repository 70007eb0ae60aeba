package kube_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/harness/otlptest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/tracing"
	"github.com/manifoldflow/manifold/sdk"
)

// TestTrace traces a run whose step b fails on both its attempts: the spans
// of its steps and attempts, with the nodes they ran on, and the TRACEPARENT of
// b's step span on its Job's (or JobSet's) pod template and its pods.
func TestTrace(t *testing.T) {
	c := simcluster.Shared(t)
	for _, as := range []string{kube.AsJob, kube.AsJobSet} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			rcv := otlptest.New(t)
			rcv.Env(t)
			tr, err := tracing.FromEnv(t.Context())
			if err != nil || tr == nil {
				t.Fatalf("tracing.FromEnv = %v, %v; want a tracer", tr, err)
			}
			f := sdk.NewFlow("kube-trace", sdk.Image("example.com/flow:v1")).
				Step("a", sdk.Command("a")).
				Step("b", sdk.After("a"), sdk.Command("b"), sdk.Label(simcluster.LabelFail, "true"), sdk.Retry(1))
			o := options(c, ns, t.TempDir())
			o.As, o.Tracer = as, tr
			r := runFlow(t, context.Background(), compileFlow(t, f), o)
			if r.err == nil {
				t.Fatal("run succeeded; want b to fail it")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			spans := rcv.Spans()
			want := `run kube-trace manifold.result=failed [Error]
  step a manifold.attempts=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
    attempt 1 manifold.attempt=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
  step b manifold.attempts=2 manifold.result=failed manifold.exit_code=1 manifold.exit_reason=Error [Error]
    attempt 1 manifold.attempt=1 manifold.result=failed [Error]
    attempt 2 manifold.attempt=2 manifold.result=failed manifold.exit_code=1 manifold.exit_reason=Error [Error]
`
			keys := []string{tracing.AttrAttempt, tracing.AttrAttempts, tracing.AttrResult, tracing.AttrExitCode, tracing.AttrReason}
			if got := otlptest.Tree(spans, keys, false); got != want {
				t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
			}
			var run, stepB otlptest.Span
			for _, s := range spans {
				switch s.Name {
				case "run kube-trace":
					run = s
				case "step b":
					stepB = s
				}
			}
			if run.Attrs[tracing.AttrRuntime] != "kube" || run.Attrs[tracing.AttrRunID] != r.res.ID {
				t.Errorf("run span attributes %v; want runtime kube, run %s", run.Attrs, r.res.ID)
			}
			// The attempt that succeeded ran on a node, which started it
			// after a wait.
			for _, s := range spans {
				if s.Name != "attempt 1" || s.Parent == stepB.SpanID {
					continue
				}
				if s.Attrs[tracing.AttrNode] != r.tasks["a"].Node || s.Attrs[tracing.AttrNode] == "" {
					t.Errorf("a's attempt: node %q; want %q, where its pod ran", s.Attrs[tracing.AttrNode], r.tasks["a"].Node)
				}
				if v, err := strconv.ParseFloat(s.Attrs[tracing.AttrPending], 64); err != nil || v < 0 {
					t.Errorf("a's attempt: %s = %q; want a duration in seconds", tracing.AttrPending, s.Attrs[tracing.AttrPending])
				}
			}

			// b's pods got the trace context of b's span; compiled manifests
			// hold none.
			tp := fmt.Sprintf("00-%s-%s-01", stepB.TraceID, stepB.SpanID)
			sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + r.res.ID + "," + plan.LabelStep + "=b"}
			pods, err := c.Client.CoreV1().Pods(ns).List(t.Context(), sel)
			if err != nil || len(pods.Items) == 0 {
				t.Fatalf("b's pods: %v, %v", pods, err)
			}
			for _, p := range pods.Items {
				got := ""
				for _, e := range p.Spec.Containers[0].Env {
					if e.Name == plan.EnvTraceParent {
						got = e.Value
					}
				}
				if got != tp {
					t.Errorf("pod %s: %s=%q; want %q", p.Name, plan.EnvTraceParent, got, tp)
				}
			}
			gvr := kinds[0]
			if as == kube.AsJobSet {
				gvr = kinds[1]
			}
			objs, err := c.Dynamic.Resource(gvr).Namespace(ns).List(t.Context(), sel)
			if err != nil || len(objs.Items) != 1 {
				t.Fatalf("b's %s: %v, %v", as, objs, err)
			}
			if got := templateEnv(objs.Items[0], plan.EnvTraceParent); got != tp {
				t.Errorf("b's %s pod template: %s=%q; want %q", as, plan.EnvTraceParent, got, tp)
			}
		})
	}
}

// templateEnv returns the value of the variable name in the first container
// of the pod template of a Job, or of a JobSet's first replicated Job.
func templateEnv(obj unstructured.Unstructured, name string) string {
	m := obj.Object
	if obj.GetKind() == "JobSet" {
		rjs, _, _ := unstructured.NestedSlice(m, "spec", "replicatedJobs")
		if len(rjs) == 0 {
			return ""
		}
		m, _ = rjs[0].(map[string]any)
		m, _, _ = unstructured.NestedMap(m, "template")
	}
	containers, _, _ := unstructured.NestedSlice(m, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return ""
	}
	c, _ := containers[0].(map[string]any)
	env, _, _ := unstructured.NestedSlice(c, "env")
	for _, e := range env {
		if e, ok := e.(map[string]any); ok && e["name"] == name {
			v, _ := e["value"].(string)
			return v
		}
	}
	return ""
}
