package argo_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/benchenv"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// splitFlow is testflows.SplitChains, which argo_max_bytes = 5000 splits
// into four parts (b0 to b3 the second); step b2 fails when fail is set.
func splitFlow(fail bool) (*sdk.Flow, []string) {
	var opts []sdk.StepOption
	if fail {
		opts = append(opts, sdk.Label(simcluster.LabelFail, "true"))
	}
	return testflows.SplitChains("split-follow", "example.com/flow:v1", opts...)
}

// deploySplit deploys the flow of f, split into four parts, and places its
// parent's pods as the simulated cluster needs them (simcluster.OnRealNode:
// a test's stand-in for an operator's workflow defaults, applied to the
// deployed parent WorkflowTemplate).
func deploySplit(t *testing.T, f flowCLI) {
	t.Helper()
	code, out, _ := f.run("deploy", "--target", "argo")
	if code != 0 {
		t.Fatalf("deploy: exit %d", code)
	}
	for n := 1; n <= 4; n++ {
		if !strings.Contains(out, "workflowtemplate/"+eargo.PartName("split-follow", n)+" ") {
			t.Errorf("deploy did not apply part %d:\n%s", n, out)
		}
	}
	if strings.Contains(out, eargo.PartName("split-follow", 5)) {
		t.Errorf("deploy applied a fifth part; the test wants four:\n%s", out)
	}
	res := f.c.Dynamic.Resource(argo.WorkflowTemplateGVR).Namespace(f.ns)
	u, err := res.Get(context.Background(), "split-follow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	simcluster.OnRealNode(u.Object["spec"].(map[string]any))
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSplitFlowFollowed: a flow split into four parts is deployed and run
// with trigger --wait, which follows every step of every part's Workflow and
// records them all; then, with step b2 failing in part 2, trigger --wait exits
// 1 naming the step, its pod and its reason, the steps after it never start,
// and runs show names it; then, the flow fixed and deployed again, retry
// --wait of that run creates part 2's Workflow anew and follows it to success.
func TestSplitFlowFollowed(t *testing.T) {
	flow, steps := splitFlow(false)
	f := newCLI(t, flow)
	if err := os.WriteFile("manifold.toml", []byte("argo_max_bytes = 5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.c.ArgoParent(t, f.ns, eargo.ParentRules())
	deploySplit(t, f)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	code, out, stderr := f.runContext(ctx, "trigger", "--target", "argo", "--wait")
	cancel()
	name := firstLine(out)
	if code != 0 {
		t.Fatalf("trigger --wait of the split flow: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(out, "run "+name+" succeeded") {
		t.Errorf("trigger --wait output lacks the run's success")
	}
	rec, tasks := readRun(t, name)
	if rec.State != record.Succeeded || len(tasks) != len(steps) {
		t.Errorf("record: run %s with %d tasks; want succeeded with %d", rec.State, len(tasks), len(steps))
	}
	parts := partWorkflows(t, f, name)
	if len(parts) != 4 {
		t.Errorf("parts' Workflows %v; want 4", parts)
	}
	for _, s := range steps {
		tk := tasks[s]
		if tk.State != record.Succeeded || tk.Node == "" || len(tk.Pods) != 1 || !slices.ContainsFunc(parts, func(p string) bool { return strings.HasPrefix(tk.Pods[0], p+"-") }) {
			t.Errorf("task %s: %+v; want succeeded, with its node and a pod of a part's Workflow", s, tk)
		}
	}

	// Step b2 fails: the flow so changed is deployed, and run.
	flow, _ = splitFlow(true)
	f.flow = flow
	deploySplit(t, f)
	ctx, cancel = context.WithTimeout(context.Background(), 6*time.Minute)
	code, out, stderr = f.runContext(ctx, "trigger", "--target", "argo", "--wait")
	cancel()
	name = firstLine(out)
	if code != 1 {
		t.Fatalf("trigger --wait with step b2 failing: exit %d; want 1", code)
	}
	parts = partWorkflows(t, f, name)
	part2 := ""
	for _, p := range parts {
		if strings.HasPrefix(p, name+"-p2-") {
			part2 = p
		}
	}
	if part2 == "" {
		t.Fatalf("no Workflow of part 2 among %v", parts)
	}
	for _, want := range []string{"step b2 failed", "pod " + part2 + "-b2-", "Error (exit 1)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the error lacks %q:\n%s", want, stderr)
		}
	}
	rec, tasks = readRun(t, name)
	if rec.State != record.Failed || tasks["b2"].State != record.Failed || tasks["b2"].Reason != "Error" {
		t.Errorf("record: run %s, b2 %+v; want b2 failed with reason Error", rec.State, tasks["b2"])
	}
	for _, s := range []string{"b3", "report"} {
		if tk := tasks[s]; tk.State == record.Succeeded || !tk.Start.IsZero() {
			t.Errorf("task %s: %+v; after b2 failed it must not start", s, tk)
		}
	}
	for _, s := range []string{"prepare", "b1", "a3", "c3"} {
		if tasks[s].State != record.Succeeded {
			t.Errorf("task %s: %+v; want succeeded (it does not wait for b2)", s, tasks[s])
		}
	}
	code, out, _ = f.run("runs", "show", "--target", "argo", name)
	if code != 0 || !strings.Contains(out, "run "+name+" of flow split-follow: Failed") || !strings.Contains(out, "\nb2") || !strings.Contains(out, part2+"-b2-") {
		t.Errorf("runs show --target argo: exit %d; want the run failed, and b2 with its pod:\n%s", code, out)
	}

	// The simulated cluster serves no pod logs: logs names b2's pod either way.
	if code, out, stderr := f.run("logs", "--target", "argo", name, "b2"); !strings.Contains(out+stderr, part2+"-b2-") {
		t.Errorf("logs --target argo RUN b2: exit %d, stdout %q, stderr %q; want b2's pod in part 2's Workflow named", code, out, stderr)
	}

	// The cause goes away: the flow is deployed again without it, and the
	// run retried.
	flow, _ = splitFlow(false)
	f.flow = flow
	deploySplit(t, f)
	ctx, cancel = context.WithTimeout(context.Background(), 6*time.Minute)
	code, out, stderr = f.runContext(ctx, "retry", "--target", "argo", "--wait", name)
	cancel()
	if code != 0 {
		t.Fatalf("retry --wait of the split run: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(out, "retrying run "+name+": b0, b1, b2, b3, report run again") {
		t.Errorf("retry output lacks the steps of parts 2 and 4 (after part 2) run again:\n%s", out)
	}
	again := partWorkflows(t, f, name)
	if len(again) != 5 || !slices.Contains(again, part2) {
		t.Errorf("parts' Workflows after retry %v; want the four of the run and a new one of part 2", again)
	}
	if code, out, stderr := f.run("logs", "--target", "argo", name, "b2"); strings.Contains(out+stderr, part2) || !strings.Contains(out+stderr, "-b2-") {
		t.Errorf("logs --target argo RUN b2 after retry: exit %d, stdout %q, stderr %q; want the pod of part 2's new Workflow, not of %s", code, out, stderr, part2)
	}
	rec, tasks = readRun(t, name)
	if rec.State != record.Succeeded {
		t.Errorf("record after retry: run %s; want succeeded", rec.State)
	}
	for _, s := range steps {
		tk := tasks[s]
		if tk.State != record.Succeeded || len(tk.Pods) != 1 || strings.HasPrefix(tk.Pods[0], part2+"-") {
			t.Errorf("task %s after retry: %+v; want succeeded, not in the failed part's Workflow %s", s, tk, part2)
		}
	}
}

// TestSplitPartNotCreated: when the parent's executor may not create the
// parts' Workflows (its service account lacks emit/argo's ParentRules),
// trigger --wait fails, and the steps not run say why with the part task's
// message.
func TestSplitPartNotCreated(t *testing.T) {
	flow, _ := splitFlow(false)
	f := newCLI(t, flow)
	if err := os.WriteFile("manifold.toml", []byte("argo_max_bytes = 5000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.c.RealNode(t)
	f.c.ArgoExecutor(t, f.ns)
	deploySplit(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	code, out, stderr := f.runContext(ctx, "trigger", "--target", "argo", "--wait")
	cancel()
	if code != 1 {
		t.Fatalf("trigger --wait with no part created: exit %d; want 1", code)
	}
	name := firstLine(out)
	if !strings.Contains(out+stderr, "its task p1 of part 1 failed") || !strings.Contains(out+stderr, "forbidden") {
		t.Errorf("the output does not say part 1's Workflow could not be created:\n%s\n%s", out, stderr)
	}
	if parts := partWorkflows(t, f, name); len(parts) != 0 {
		t.Errorf("parts' Workflows %v; want none", parts)
	}
}

// partWorkflows returns the names of the Workflows that run name created.
func partWorkflows(t *testing.T, f flowCLI, name string) []string {
	t.Helper()
	return names(t, f.c, argo.WorkflowGVR, f.ns, argo.LabelParentWorkflow+"="+name)
}

// BenchmarkSplitTriggerWait runs a generated flow split into parts (a root
// step, then chains of ten steps after it; MANIFOLD_BENCH_STEPS steps, 300
// unless set, in parts of at most MANIFOLD_BENCH_ARGO_MAX_BYTES bytes, 60000
// unless set) as `trigger --wait` does: Trigger, then Follow to the end, every
// step's pod on kwok nodes and the parent's on the real node. It reports the
// wall time from Trigger to Follow's end, the time from Trigger to the first
// pod (the parent's first part task) and to the first step's pod, and the
// parts. With MANIFOLD_BENCH_ARGO_REQUEUE set (a Go duration: 10s is Argo's
// default, as a deployment runs it) it runs on a cluster of its own whose Argo
// controller takes a changed Workflow up again after that long, instead of
// the shared cluster's 1 s.
//
//	MANIFOLD_BENCH_STEPS=300 go test -run '^$' -bench SplitTriggerWait -benchtime 1x -timeout 30m ./runtimes/argo
func BenchmarkSplitTriggerWait(b *testing.B) {
	steps, maxBytes := benchenv.Int(b, "MANIFOLD_BENCH_STEPS", 300, 1), benchenv.Int(b, "MANIFOLD_BENCH_ARGO_MAX_BYTES", 60000, 1)
	f := sdk.NewFlow("split-bench", sdk.Image("example.com/flow:v1"), sdk.CPU("1m"), sdk.Memory("1Mi"))
	f.Step("root", sdk.Command("true"))
	for i := 1; i < steps; i++ {
		after := "root"
		if i%10 != 1 {
			after = fmt.Sprint("s", i-1)
		}
		f.Step(fmt.Sprint("s", i), sdk.Command("true"), sdk.After(after))
	}
	p := compileFlow(b, f)
	p.ArgoMaxBytes = maxBytes
	var c *simcluster.Cluster
	if d := benchenv.Duration(b, "MANIFOLD_BENCH_ARGO_REQUEUE", 0); d != 0 {
		c = simcluster.Dedicated(b, simcluster.Options{ArgoRequeue: d})
	} else {
		c = simcluster.Shared(b)
	}
	ns := c.Namespace(b)
	c.ArgoParent(b, ns, eargo.ParentRules())
	ctx := context.Background()
	a, err := argo.Connect(ctx, p, argo.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	done, err := a.Deploy(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	res := c.Dynamic.Resource(argo.WorkflowTemplateGVR).Namespace(ns)
	u, err := res.Get(ctx, "split-bench", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	simcluster.OnRealNode(u.Object["spec"].(map[string]any))
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		b.Fatal(err)
	}
	var wall, firstPod, firstStep time.Duration
	for b.Loop() {
		start := time.Now()
		name, _, err := a.Trigger(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		first := make(chan [2]time.Time, 1)
		go func() { first <- firstPods(b, c, ns) }()
		r, err := a.Follow(ctx, name)
		if err != nil || r.State != record.Succeeded {
			b.Fatalf("run %s: %v, %v", name, r.State, err)
		}
		wall += time.Since(start)
		at := <-first
		firstPod += at[0].Sub(start)
		firstStep += at[1].Sub(start)
	}
	n := float64(b.N)
	b.ReportMetric(wall.Seconds()/n, "s-wall")
	b.ReportMetric(float64(firstPod.Milliseconds())/n, "ms-to-first-pod")
	b.ReportMetric(float64(firstStep.Milliseconds())/n, "ms-to-first-step-pod")
	b.ReportMetric(float64(steps), "steps")
	b.ReportMetric(float64(len(done)-1), "parts")
}

// firstPods returns when the first pod of namespace ns was seen, and the
// first pod of a step (labelled plan.LabelStep).
func firstPods(b *testing.B, c *simcluster.Cluster, ns string) (at [2]time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		b.Error(err)
		return at
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		if at[0].IsZero() {
			at[0] = time.Now()
		}
		if p.Labels[plan.LabelStep] != "" {
			at[1] = time.Now()
			return at
		}
	}
	return at
}
