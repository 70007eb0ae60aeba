package argo_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/manifoldflow/manifold/compile"
	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/otlptest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
	"github.com/manifoldflow/manifold/sdk"
)

func compileFlow(t testing.TB, f *sdk.Flow) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	return p
}

// deployed connects to the shared cluster for flow f, in a namespace of its
// own, and deploys it.
func deployed(t testing.TB, f *sdk.Flow, o argo.Options) (*argo.Client, *simcluster.Cluster, string) {
	t.Helper()
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	o.Kubeconfig, o.Namespace = c.Kubeconfig, ns
	if o.Root == "" {
		o.Root = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := argo.Connect(ctx, compileFlow(t, f), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deploy(ctx, false); err != nil {
		t.Fatal(err)
	}
	return a, c, ns
}

// workflow returns Workflow name as the API server has it.
func workflow(t *testing.T, c *simcluster.Cluster, ns, name string) *unstructured.Unstructured {
	t.Helper()
	wf, err := c.Dynamic.Resource(argo.WorkflowGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// podRunning waits until a pod of Workflow name runs.
func podRunning(t testing.TB, c *simcluster.Cluster, ns, name string) (created, running time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok || ev.Type == watch.Deleted {
			continue
		}
		if created.IsZero() {
			created = time.Now()
		}
		if p.Status.Phase == corev1.PodRunning {
			return created, time.Now()
		}
	}
	t.Fatalf("no pod of Workflow %s ran: %v", name, ctx.Err())
	return
}

// TestSuspendResumeInterrupt suspends and resumes a run, then follows it and
// interrupts the following twice: left running the first time, stopped
// (spec.shutdown=Stop) the second, when the run ends Failed and is recorded
// interrupted.
func TestSuspendResumeInterrupt(t *testing.T) {
	answer, asked := false, 0
	f := sdk.NewFlow("argo-stop", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("sleep", "30"), sdk.Label(simcluster.LabelRunFor, "30s")).
		Step("b", sdk.After("a"), sdk.Command("echo", "b"))
	a, c, ns := deployed(t, f, argo.Options{OnInterrupt: func(string) bool { asked++; return answer }})
	ctx := context.Background()
	name, _, err := a.Trigger(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Suspend(ctx, name); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedBool(workflow(t, c, ns, name).Object, "spec", "suspend"); !v {
		t.Error("after Suspend, spec.suspend is not true")
	}
	if err := a.Resume(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := unstructured.NestedFieldNoCopy(workflow(t, c, ns, name).Object, "spec", "suspend"); ok {
		t.Error("after Resume, spec.suspend is still set")
	}
	podRunning(t, c, ns, name)

	follow := func() (*dag.Result, error) {
		fctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(2*time.Second, cancel)
		return a.Follow(fctx, name)
	}
	res, err := follow()
	if !errors.Is(err, dag.ErrInterrupted) || res.State != record.Interrupted || asked != 1 {
		t.Fatalf("Follow interrupted and left: %v, %v, asked %d times; want interrupted after one question", res, err, asked)
	}
	if !strings.Contains(err.Error(), "goes on running on the cluster") {
		t.Errorf("left running: %v; want it said", err)
	}
	if s, _, _ := unstructured.NestedString(workflow(t, c, ns, name).Object, "spec", "shutdown"); s != "" {
		t.Errorf("left running, the Workflow has spec.shutdown %q", s)
	}

	answer = true
	res, err = follow()
	if !errors.Is(err, dag.ErrInterrupted) || res.State != record.Interrupted || asked != 2 || len(res.Failed) != 0 {
		t.Fatalf("Follow interrupted and stopped: %v, %v, asked %d times", res, err, asked)
	}
	wf := workflow(t, c, ns, name)
	if s, _, _ := unstructured.NestedString(wf.Object, "spec", "shutdown"); s != "Stop" {
		t.Errorf("stopped, the Workflow has spec.shutdown %q; want Stop", s)
	}
	if p, _, _ := unstructured.NestedString(wf.Object, "status", "phase"); p != "Failed" {
		t.Errorf("stopped, the Workflow is %q; want Failed (Follow waits for it to end)", p)
	}
	if err := a.Stop(ctx, name); err == nil || !strings.Contains(err.Error(), "has ended") {
		t.Errorf("Stop of an ended run: %v; want it refused", err)
	}
}

// TestFollowTraced traces a run followed with trigger --wait whose step b
// fails on both its attempts: the spans of its steps and attempts.
func TestFollowTraced(t *testing.T) {
	flow := sdk.NewFlow("argo-trace", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("a")).
		Step("b", sdk.After("a"), sdk.Command("b"), sdk.Label(simcluster.LabelFail, "true"), sdk.Retry(1), sdk.RetryBackoff(time.Second))
	f := newCLI(t, flow)
	rcv := otlptest.New(t)
	rcv.Env(t)
	if code, _, _ := f.run("deploy", "--target", "argo"); code != 0 {
		t.Fatal("deploy failed")
	}
	code, out, _ := f.run("trigger", "--target", "argo", "--wait")
	if code != 1 {
		t.Fatalf("trigger --wait: exit %d; want 1, b failed", code)
	}
	name := firstLine(out)
	spans := rcv.Spans()
	want := `run argo-trace manifold.result=failed [Error]
  step a manifold.attempts=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
    attempt 1 manifold.attempt=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
  step b manifold.attempts=2 manifold.result=failed manifold.exit_code=1 manifold.exit_reason=Error [Error]
    attempt 1 manifold.attempt=1 manifold.result=failed manifold.exit_code=1 manifold.exit_reason=Error [Error]
    attempt 2 manifold.attempt=2 manifold.result=failed manifold.exit_code=1 manifold.exit_reason=Error [Error]
`
	keys := []string{tracing.AttrAttempt, tracing.AttrAttempts, tracing.AttrResult, tracing.AttrExitCode, tracing.AttrReason}
	if got := otlptest.Tree(spans, keys, false); got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}
	rec, tasks := readRun(t, name)
	if _, ok := rec.Params[eargo.ParamTraceParent]; ok {
		t.Errorf("the run's params %v show the reserved %s", rec.Params, eargo.ParamTraceParent)
	}
	var traceID string
	for _, s := range spans {
		if s.Name == "run argo-trace" {
			traceID = s.TraceID
		}
	}
	// Every step's pod continues the run's trace: TRACEPARENT is the run's span.
	for pod, tp := range traceParents(t, f.c, f.ns, name) {
		if parts := strings.Split(tp, "-"); len(parts) != 4 || parts[1] != traceID {
			t.Errorf("pod %s: TRACEPARENT %q; want a W3C trace context in the run's trace %s", pod, tp, traceID)
		}
	}
	for _, s := range spans {
		switch {
		case s.Name == "run argo-trace":
			if s.Attrs[tracing.AttrRuntime] != "argo" || s.Attrs[tracing.AttrRunID] != name {
				t.Errorf("run span attributes %v; want runtime argo, run %s", s.Attrs, name)
			}
		case strings.HasPrefix(s.Name, "attempt "):
			if n := s.Attrs[tracing.AttrNode]; n == "" || n != tasks["a"].Node && n != tasks["b"].Node {
				t.Errorf("%s: node %q; want where the pods ran (%s, %s)", s.Name, n, tasks["a"].Node, tasks["b"].Node)
			}
			if v, err := strconv.ParseFloat(s.Attrs[tracing.AttrPending], 64); err != nil || v < 0 {
				t.Errorf("%s: %s = %q; want a duration in seconds", s.Name, tracing.AttrPending, s.Attrs[tracing.AttrPending])
			}
		}
	}
}

// traceParents returns the TRACEPARENT of the main container of each pod of
// Workflow name, by pod, failing when a pod has none or the Workflow none.
func traceParents(t *testing.T, c *simcluster.Cluster, ns, name string) map[string]string {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "workflows.argoproj.io/workflow=" + name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatalf("Workflow %s has no pods", name)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		for _, ct := range p.Spec.Containers {
			if ct.Name != plan.ContainerName {
				continue
			}
			i := slices.IndexFunc(ct.Env, func(e corev1.EnvVar) bool { return e.Name == plan.EnvTraceParent })
			if i < 0 {
				t.Fatalf("pod %s has no %s: %v", p.Name, plan.EnvTraceParent, ct.Env)
			}
			out[p.Name] = ct.Env[i].Value
		}
	}
	return out
}

// BenchmarkTriggerToPod measures, on the simulated cluster with Argo's real
// controller, the time from Trigger to the first pod of a two-step flow:
// created, and running.
func BenchmarkTriggerToPod(b *testing.B) {
	f := sdk.NewFlow("argo-bench", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("echo", "a")).
		Step("b", sdk.After("a"), sdk.Command("echo", "b"))
	a, c, ns := deployed(b, f, argo.Options{})
	var created, running time.Duration
	for b.Loop() {
		start := time.Now()
		name, _, err := a.Trigger(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		cr, run := podRunning(b, c, ns, name)
		created += cr.Sub(start)
		running += run.Sub(start)
	}
	b.ReportMetric(float64(created.Milliseconds())/float64(b.N), "ms-to-pod-created")
	b.ReportMetric(float64(running.Milliseconds())/float64(b.N), "ms-to-pod-running")
}

// TestDeployUpdatesAndPrunes deploys a scheduled flow whose command holds "{{"
// (a CronWorkflow and the literals ConfigMap beside the template), then the
// flow changed: the template is updated in place, and the CronWorkflow and
// ConfigMap the flow no longer makes are deleted, while a ConfigMap of the
// same flow that deploy did not make stays.
func TestDeployUpdatesAndPrunes(t *testing.T) {
	v1 := sdk.NewFlow("argo-prune", sdk.Image("example.com/flow:v1"), sdk.Schedule("0 3 * * *")).
		Step("a", sdk.Command("echo", "{{not a tag}}"))
	a, c, ns := deployed(t, v1, argo.Options{})
	ctx := context.Background()
	cms := c.Client.CoreV1().ConfigMaps(ns)
	mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argo-prune-mine", Labels: map[string]string{plan.LabelFlow: "argo-prune"}}}
	if _, err := cms.Create(ctx, mine, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cron, err := c.Dynamic.Resource(argo.CronWorkflowGVR).Namespace(ns).Get(ctx, "argo-prune", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the scheduled flow's CronWorkflow: %v", err)
	}
	if cron.GetLabels()[argo.LabelDeploy] != "argo" {
		t.Errorf("CronWorkflow labels %v; want %s=argo", cron.GetLabels(), argo.LabelDeploy)
	}
	if _, err := cms.Get(ctx, "argo-prune-literals", metav1.GetOptions{}); err != nil {
		t.Fatalf("the literals ConfigMap: %v", err)
	}
	wt := workflowTemplate(t, c, ns, "argo-prune")

	v2 := sdk.NewFlow("argo-prune", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("echo", "plain"))
	o := argo.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Root: t.TempDir()}
	b, err := argo.Connect(ctx, compileFlow(t, v2), o)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := b.Deploy(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	done, err := b.Deploy(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range done {
		got = append(got, d.String())
	}
	want := []string{"workflowtemplate/argo-prune updated", "cronworkflow/argo-prune deleted", "configmap/argo-prune-literals deleted"}
	if !slices.Equal(got, want) {
		t.Errorf("deploy of the changed flow: %q; want %q", got, want)
	}
	got = got[:0]
	for _, d := range dry {
		got = append(got, d.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("a dry run of the deploy: %q; want %q", got, want)
	}
	if now := workflowTemplate(t, c, ns, "argo-prune"); now.GetUID() != wt.GetUID() {
		t.Error("the WorkflowTemplate was made anew; want it updated in place")
	}
	if _, err := cms.Get(ctx, mine.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a ConfigMap deploy did not make is gone: %v", err)
	}
	if done, err := a.Undeploy(ctx, false); err != nil || len(done) != 1 || done[0].String() != "workflowtemplate/argo-prune deleted" {
		t.Errorf("Undeploy: %v, %v; want the template deleted, and nothing else", done, err)
	}
}

func workflowTemplate(t *testing.T, c *simcluster.Cluster, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := c.Dynamic.Resource(argo.WorkflowTemplateGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}
