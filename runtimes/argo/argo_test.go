package argo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

func TestMain(m *testing.M) { os.Exit(simcluster.Main(m)) }

// flowCLI runs the command line of flow's program, in the test's working
// directory, against the simulated cluster's namespace ns.
type flowCLI struct {
	t    *testing.T
	flow *sdk.Flow
	c    *simcluster.Cluster
	ns   string
}

// run runs the command args with the cluster's flags and returns its exit
// status, standard output and standard error.
func (f flowCLI) run(args ...string) (int, string, string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	return f.runContext(ctx, args...)
}

func (f flowCLI) runContext(ctx context.Context, args ...string) (int, string, string) {
	f.t.Helper()
	var stdout, stderr bytes.Buffer
	full := append([]string{f.flow.Name()}, args[0])
	if args[0] == "runs" {
		full, args = append(full, args[1]), args[1:]
	}
	full = append(full, "--kubeconfig", f.c.Kubeconfig, "--namespace", f.ns)
	full = append(full, args[1:]...)
	code := cli.Run(ctx, f.flow, full, &stdout, &stderr)
	f.t.Logf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(full[:2], " "), code, stdout.String(), stderr.String())
	return code, stdout.String(), stderr.String()
}

// newCLI readies a namespace and a working directory of its own for flow.
func newCLI(t *testing.T, flow *sdk.Flow) flowCLI {
	c := simcluster.Shared(t)
	t.Chdir(t.TempDir())
	return flowCLI{t: t, flow: flow, c: c, ns: c.Namespace(t)}
}

// firstLine is the run's name that trigger prints first.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// readRun reads back the record of run id, with its tasks by label.
func readRun(t *testing.T, id string) (*record.Record, map[string]record.Task) {
	t.Helper()
	rec, tasks, err := record.Read(record.DefaultRoot, id)
	if err != nil {
		t.Fatalf("record of run %s: %v", id, err)
	}
	byLabel := map[string]record.Task{}
	for _, tk := range tasks {
		byLabel[tk.Label()] = tk
	}
	return rec, byLabel
}

// names returns the sorted names of the objects of resource gvr in namespace
// ns that selector (a label selector; "" for all) selects.
func names(t *testing.T, c *simcluster.Cluster, gvr schema.GroupVersionResource, ns, selector string) []string {
	t.Helper()
	list, err := c.Dynamic.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		out = append(out, u.GetName())
	}
	slices.Sort(out)
	return out
}

// TestDeployTriggerUndeploy deploys a flow beside a WorkflowTemplate of
// someone else's, runs it with --wait to success (display and record checked),
// lists and shows the run, and undeploys the flow, which leaves the other
// template, and then refuses to trigger it.
func TestDeployTriggerUndeploy(t *testing.T) {
	flow := sdk.NewFlow("argo-life", sdk.Image("example.com/flow:v1"), sdk.Param("greeting", "hi")).
		Step("a", sdk.Command("echo", "$(MANIFOLD_PARAM_GREETING)")).
		Step("b", sdk.After("a"), sdk.Command("echo", "b"), sdk.Foreach("x", "y")).
		Step("c", sdk.After("b"), sdk.Command("echo", "c"))
	f := newCLI(t, flow)
	other := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
		"metadata": map[string]any{"name": "someone-elses", "labels": map[string]any{"manifold.dev/flow": "argo-life"}},
		"spec":     map[string]any{"entrypoint": "main", "templates": []any{map[string]any{"name": "main", "suspend": map[string]any{}}}},
	}}
	if _, err := f.c.Create(context.Background(), other, f.ns); err != nil {
		t.Fatal(err)
	}

	if code, _, stderr := f.run("trigger", "--target", "argo"); code != 1 || !strings.Contains(stderr, "run `argo-life deploy --target argo` first") {
		t.Errorf("trigger before deploy: exit %d, stderr %q; want 1 and what to run first", code, stderr)
	}
	if code, out, _ := f.run("deploy", "--target", "argo", "--dry-run=server"); code != 0 || !strings.Contains(out, "workflowtemplate/argo-life created (server dry run)") {
		t.Errorf("deploy --dry-run=server: exit %d, stdout %q", code, out)
	}
	if got := names(t, f.c, argo.WorkflowTemplateGVR, f.ns, ""); !slices.Equal(got, []string{"someone-elses"}) {
		t.Errorf("after a dry run the WorkflowTemplates are %v; want only someone-elses", got)
	}
	if code, out, _ := f.run("deploy", "--target", "argo"); code != 0 || !strings.Contains(out, "workflowtemplate/argo-life created") {
		t.Fatalf("deploy: exit %d, stdout %q", code, out)
	}
	if code, out, _ := f.run("deploy", "--target", "argo"); code != 0 || !strings.Contains(out, "workflowtemplate/argo-life unchanged") {
		t.Errorf("deploy again: exit %d, stdout %q; want the template unchanged", code, out)
	}

	code, out, stderr := f.run("trigger", "--target", "argo", "--wait", "--param", "greeting=hello")
	if code != 0 {
		t.Fatalf("trigger --wait: exit %d\n%s", code, stderr)
	}
	name := firstLine(out)
	if !strings.HasPrefix(name, "argo-life-") {
		t.Fatalf("trigger printed %q first; want the Workflow's name", name)
	}
	// Untraced, the steps' TRACEPARENT is empty.
	for pod, tp := range traceParents(t, f.c, f.ns, name) {
		if tp != "" {
			t.Errorf("pod %s of an untraced run: TRACEPARENT %q; want empty", pod, tp)
		}
	}
	for _, want := range []string{"following Workflow " + name + " of flow argo-life: 3 steps in namespace " + f.ns, "record in .manifold/runs/" + name, "run " + name + " succeeded"} {
		if !strings.Contains(out, want) {
			t.Errorf("trigger --wait output lacks %q", want)
		}
	}
	rec, tasks := readRun(t, name)
	if rec.State != record.Succeeded || rec.Runtime != "argo" || rec.Namespace != f.ns || rec.Params["greeting"] != "hello" {
		t.Errorf("record: state %s, runtime %q, namespace %q, params %v; want succeeded on argo in %s with greeting=hello", rec.State, rec.Runtime, rec.Namespace, rec.Params, f.ns)
	}
	for _, label := range []string{"a", "b[0]", "b[1]", "c"} {
		tk, ok := tasks[label]
		if !ok || tk.State != record.Succeeded || tk.Attempts != 1 || tk.Node == "" || len(tk.Pods) != 1 {
			t.Errorf("task %s: %+v (recorded %v); want succeeded in one attempt, with its node and pod", label, tk, ok)
		}
	}

	if code, out, _ := f.run("runs", "list", "--target", "argo"); code != 0 || !strings.Contains(out, name) || !strings.Contains(out, "Succeeded") {
		t.Errorf("runs list --target argo: exit %d, stdout %q", code, out)
	}
	code, out, _ = f.run("runs", "show", "--target", "argo", name)
	if code != 0 || !strings.Contains(out, "run "+name+" of flow argo-life: Succeeded") {
		t.Errorf("runs show --target argo: exit %d, stdout %q", code, out)
	}
	for _, label := range []string{"a ", "b[0]", "b[1]", "c "} {
		if !strings.Contains(out, "\n"+label) {
			t.Errorf("runs show lacks a row for %s", label)
		}
	}

	// The local record of the followed run reads like any cluster run's.
	if code, out, _ := f.run("runs", "show", name); code != 0 || !strings.Contains(out, "run by Argo Workflows (Workflow "+name+")") {
		t.Errorf("runs show of the record: exit %d, stdout %q", code, out)
	}

	// The simulated cluster serves no pod logs, and its pods are gone once
	// done: logs names step a's pod either way.
	code, out, stderr = f.run("logs", "--target", "argo", name, "a")
	if !strings.Contains(out+stderr, name+"-a-") || strings.Contains(out+stderr, name+"-c-") {
		t.Errorf("logs --target argo RUN a: exit %d, stdout %q, stderr %q; want step a's pod named, and only a's", code, out, stderr)
	}

	if code, out, _ := f.run("undeploy", "--target", "argo"); code != 0 || !strings.Contains(out, "workflowtemplate/argo-life deleted") {
		t.Errorf("undeploy: exit %d, stdout %q", code, out)
	}
	if got := names(t, f.c, argo.WorkflowTemplateGVR, f.ns, ""); !slices.Equal(got, []string{"someone-elses"}) {
		t.Errorf("after undeploy the WorkflowTemplates are %v; want only someone-elses", got)
	}
	if _, err := f.c.Dynamic.Resource(argo.WorkflowGVR).Namespace(f.ns).Get(context.Background(), name, metav1.GetOptions{}); err != nil {
		t.Errorf("undeploy removed run %s: %v; runs stay", name, err)
	}
}

// TestFailedStepRetried runs a flow whose middle step fails on both its
// attempts: trigger --wait exits 1 naming the step, its pod and the reason, and
// the step after it never runs. Once the cause is gone, retry --wait runs
// again only the failed step, and what follows it, to success.
func TestFailedStepRetried(t *testing.T) {
	flow := sdk.NewFlow("argo-retry", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("echo", "a")).
		Step("b", sdk.After("a"), sdk.Command("false"), sdk.Label(simcluster.LabelFail, "true"), sdk.Retry(1), sdk.RetryBackoff(time.Second)).
		Step("c", sdk.After("b"), sdk.Command("echo", "c"))
	f := newCLI(t, flow)
	if code, _, _ := f.run("deploy", "--target", "argo"); code != 0 {
		t.Fatal("deploy failed")
	}
	code, out, stderr := f.run("trigger", "--target", "argo", "--wait")
	name := firstLine(out)
	if code != 1 {
		t.Fatalf("trigger --wait of a failing flow: exit %d; want 1", code)
	}
	for _, want := range []string{"step b failed", "pod " + name + "-b-", "Error (exit 1)", "c"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the error lacks %q:\n%s", want, stderr)
		}
	}
	rec, tasks := readRun(t, name)
	if rec.State != record.Failed || tasks["b"].State != record.Failed || tasks["b"].Attempts != 2 || tasks["b"].Reason != "Error" ||
		tasks["a"].State != record.Succeeded || tasks["c"].State == record.Succeeded || !tasks["c"].Start.IsZero() {
		t.Errorf("record: run %s, a %+v, b %+v, c %+v; want b failed after 2 attempts, a succeeded, c never started", rec.State, tasks["a"], tasks["b"], tasks["c"])
	}
	nodeA := nodeOf(t, f, name, "a")

	// The cause goes away: the Workflow's step b no longer carries the label
	// that has the simulated node fail its pods.
	fixStep(t, f, name, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	code, out, stderr = f.runContext(ctx, "retry", "--target", "argo", "--wait", name)
	cancel()
	if code != 0 {
		wf, _ := f.c.Dynamic.Resource(argo.WorkflowGVR).Namespace(f.ns).Get(context.Background(), name, metav1.GetOptions{})
		st, _ := json.MarshalIndent(wf.Object["status"], "", " ")
		t.Logf("Workflow %s status:\n%s", name, st)
		t.Fatalf("retry --wait: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(out, "retrying run "+name+": b run again") {
		t.Errorf("retry output %q; want the steps run again", out)
	}
	rec, tasks = readRun(t, name)
	if rec.State != record.Succeeded || tasks["b"].State != record.Succeeded || tasks["c"].State != record.Succeeded {
		t.Errorf("record after retry: run %s, b %+v, c %+v; want them succeeded", rec.State, tasks["b"], tasks["c"])
	}
	if got := nodeOf(t, f, name, "a"); got != nodeA {
		t.Errorf("step a's node after retry:\n%s\nbefore:\n%s\na succeeded and must not run again", got, nodeA)
	}
	if code, _, stderr := f.run("retry", "--target", "argo", name); code != 1 || !strings.Contains(stderr, "only a run that failed can be retried") {
		t.Errorf("retry of a succeeded run: exit %d, %q", code, stderr)
	}
}

// nodeOf returns Argo's node of step (a task without foreach) in Workflow
// name: its ID, phase and start time.
func nodeOf(t *testing.T, f flowCLI, name, step string) string {
	t.Helper()
	wf, err := f.c.Dynamic.Resource(argo.WorkflowGVR).Namespace(f.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	for id, n := range nodes {
		n := n.(map[string]any)
		if n["displayName"] == step {
			return fmt.Sprintf("%s %v %v", id, n["phase"], n["startedAt"])
		}
	}
	t.Fatalf("Workflow %s has no node of step %s", name, step)
	return ""
}

// fixStep removes simcluster.LabelFail from step's template in the spec Argo
// stored in Workflow name when it started.
func fixStep(t *testing.T, f flowCLI, name, step string) {
	t.Helper()
	res := f.c.Dynamic.Resource(argo.WorkflowGVR).Namespace(f.ns)
	wf, err := res.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tpls, _, _ := unstructured.NestedSlice(wf.Object, "status", "storedWorkflowTemplateSpec", "templates")
	fixed := false
	for _, tpl := range tpls {
		m := tpl.(map[string]any)
		if m["name"] != step {
			continue
		}
		if labels, ok, _ := unstructured.NestedMap(m, "metadata", "labels"); ok {
			delete(labels, simcluster.LabelFail)
			unstructured.SetNestedMap(m, labels, "metadata", "labels")
			fixed = true
		}
	}
	if !fixed {
		t.Fatalf("Workflow %s stored no template %s labelled %s", name, step, simcluster.LabelFail)
	}
	unstructured.SetNestedSlice(wf.Object, tpls, "status", "storedWorkflowTemplateSpec", "templates")
	if _, err := res.Update(context.Background(), wf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
