package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/benchenv"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// splitRun is how a split flow's run ended: the parent's Workflow and the
// parts' Workflows it created, as Argo's controller left them.
type splitRun struct {
	parent *wfv1.Workflow
	parts  []wfv1.Workflow
	// wall is from the parent's creation to its end as the watch saw it.
	wall time.Duration
}

// runSplit applies the argo target's output for p in namespace ns, as
// `kubectl apply -f <flow>.argo.yaml` would, each part's WorkflowTemplate and
// then the parent, and runs a Workflow of the parent until it ends, within
// timeout.
//
// The parent's resource templates create the parts' Workflows through Argo's
// executor, which must really run: kwok would "complete" their pods at once,
// creating nothing. So they run on the cluster's real node, in its network,
// where the executor reaches the API server on loopback (the steps of the
// parts run on kwok nodes as usual); the test adds that placement to the
// parent as a cluster's operator would set a workflow default
// (simcluster.ArgoParent and OnRealNode).
func runSplit(t testing.TB, c *simcluster.Cluster, ns string, p *plan.Flow, timeout time.Duration) *splitRun {
	t.Helper()
	c.ArgoParent(t, ns, argo.ParentRules())
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	objs, err := simcluster.Decode(files[0].Data)
	if err != nil {
		t.Fatal(err)
	}
	var parent *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "WorkflowTemplate" {
			continue
		}
		if o.GetName() == p.Name {
			parent = o
			simcluster.OnRealNode(o.Object["spec"].(map[string]any))
		}
		if _, err := c.Create(ctx, o, ns); err != nil {
			t.Fatalf("the API server refused the WorkflowTemplate %s: %v", o.GetName(), err)
		}
	}
	if parent == nil || len(objs) < 3 {
		t.Fatalf("the flow was not split: %d documents", len(objs))
	}
	// A resubmission (Argo's controller not yet holding the templates just
	// made) counts in the wall time: it takes milliseconds.
	start := time.Now()
	ended, err := c.RunFromTemplate(ctx, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"generateName": p.Name + "-"},
		"spec":       map[string]any{"workflowTemplateRef": map[string]any{"name": p.Name}},
	}})
	r := &splitRun{wall: time.Since(start), parent: &wfv1.Workflow{}}
	if ended != nil {
		fromUnstructured(t, ended, r.parent)
	}
	// An API server under the load of thousands of steps may refuse a list
	// for a while ("storage is (re)initializing", a stream reset): ask again,
	// for up to five minutes.
	var list *unstructured.UnstructuredList
	var lerr error
	for wait, deadline := time.Second, time.Now().Add(5*time.Minute); ; wait = min(2*wait, 15*time.Second) {
		if list, lerr = c.Dynamic.Resource(simcluster.WorkflowGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: argo.LabelParentWorkflow + "=" + r.parent.Name,
		}); lerr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(wait)
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	for i := range list.Items {
		var wf wfv1.Workflow
		fromUnstructured(t, &list.Items[i], &wf)
		r.parts = append(r.parts, wf)
	}
	slices.SortFunc(r.parts, func(a, b wfv1.Workflow) int {
		return strings.Compare(a.Labels[argo.LabelPart], b.Labels[argo.LabelPart])
	})
	if err != nil {
		pods, _ := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labelWorkflow + "=" + r.parent.Name})
		var b strings.Builder
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "pod %s on %s: %s %s\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message)
			for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
				fmt.Fprintf(&b, "  %s: %+v\n", cs.Name, cs.State)
			}
			for _, cond := range p.Status.Conditions {
				fmt.Fprintf(&b, "  %s=%s %s\n", cond.Type, cond.Status, cond.Message)
			}
		}
		t.Fatalf("%v\n%s%s", err, r.describe(), b.String())
	}
	return r
}

func fromUnstructured(t testing.TB, u *unstructured.Unstructured, wf *wfv1.Workflow) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, wf); err != nil {
		t.Fatalf("Workflow %s: %v", u.GetName(), err)
	}
}

// describe says how each Workflow of the run ended, for a failure's message.
func (r *splitRun) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "parent %s: %s %s (%d nodes)\n", r.parent.Name, r.parent.Status.Phase, r.parent.Status.Message, len(r.parent.Status.Nodes))
	for _, n := range r.parent.Status.Nodes {
		if n.Type == wfv1.NodeTypePod {
			fmt.Fprintf(&b, "  %s: %s %s\n", n.DisplayName, n.Phase, n.Message)
		}
	}
	for _, p := range r.parts {
		fmt.Fprintf(&b, "part %s %s: %s %s (%d nodes)\n", p.Labels[argo.LabelPart], p.Name, p.Status.Phase, p.Status.Message, len(p.Status.Nodes))
	}
	return b.String()
}

// sizes reports, for each part's Workflow as it ended, its size as Argo
// measures it (its JSON), its nodes, and the bytes of status a node took.
func (r *splitRun) sizes(t testing.TB) (largest int, perNode float64) {
	t.Helper()
	var nodeBytes, nodes int
	for _, p := range r.parts {
		data, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, len(data))
		ns, err := json.Marshal(p.Status.Nodes)
		if err != nil {
			t.Fatal(err)
		}
		nodeBytes += len(ns)
		nodes += len(p.Status.Nodes)
		if p.Status.CompressedNodes != "" {
			t.Logf("part %s: its node status was compressed", p.Name)
		}
	}
	return largest, float64(nodeBytes) / float64(max(nodes, 1))
}

// BenchmarkArgoSplitRun runs a generated fan-out of 5,000 steps (testflows,
// as the runtimes' load benchmarks) split into parts: applied, and run from
// the parent to Succeeded by Argo's controller, every step's pod on kwok
// nodes, no part's Workflow near Argo's 1 MiB. It reports the wall time from
// the parent's creation to its end, steps a second, the workflow-controller's
// and the API server's processor time and the largest part's Workflow. (A
// benchmark, not a test: on the 2-core development machine it takes longer
// than a test may; see docs/performance.md.)
//
// It starts a cluster of its own, with Argo's minimal CRDs as its install
// manifests apply them (the test suite checks the emitted objects against the
// full ones), whose Argo controller takes a changed
// Workflow up again after 10 s, Argo's default, as a deployment runs it
// (simcluster.ArgoDeployedRequeue), not the shared cluster's 1 s:
// MANIFOLD_BENCH_ARGO_REQUEUE (a Go duration) sets another.
// MANIFOLD_BENCH_STEPS sets another count of steps.
//
//	go test -run '^$' -bench ArgoSplitRun -benchtime 1x -timeout 90m ./harness/e2e
func BenchmarkArgoSplitRun(b *testing.B) {
	steps := benchenv.Int(b, "MANIFOLD_BENCH_STEPS", 5000, 1)
	requeue := benchenv.Duration(b, "MANIFOLD_BENCH_ARGO_REQUEUE", simcluster.ArgoDeployedRequeue)
	c := simcluster.Dedicated(b, simcluster.Options{ArgoRequeue: requeue, ArgoMinimalCRDs: true})
	p := testflows.Compile(b, testflows.FanOut(steps))
	for range b.N {
		ns := c.Namespace(b)
		cpu0, err := c.CPU("workflow-controller")
		if err != nil {
			b.Fatal(err)
		}
		api0, err := c.CPU(simcluster.APIServer)
		if err != nil {
			b.Fatal(err)
		}
		r := runSplit(b, c, ns, p, 80*time.Minute)
		cpu, err := c.CPU("workflow-controller")
		if err != nil {
			b.Fatal(err)
		}
		api, err := c.CPU(simcluster.APIServer)
		if err != nil {
			b.Fatal(err)
		}
		if r.parent.Status.Phase != wfv1.WorkflowSucceeded {
			b.Fatalf("the parent ended %s:\n%s", r.parent.Status.Phase, r.describe())
		}
		ran := 0
		for _, part := range r.parts {
			if part.Status.Phase != wfv1.WorkflowSucceeded {
				b.Errorf("part %s ended %s: %s", part.Name, part.Status.Phase, part.Status.Message)
			}
			for _, n := range part.Status.Nodes {
				if n.Type == wfv1.NodeTypePod && n.Phase == wfv1.NodeSucceeded {
					ran++
				}
			}
		}
		if ran != steps {
			b.Errorf("%d steps succeeded, want %d:\n%s", ran, steps, r.describe())
		}
		largest, perNode := r.sizes(b)
		if largest > 1<<20*3/4 {
			b.Errorf("the largest part's Workflow is %d bytes, near Argo's 1 MiB", largest)
		}
		b.ReportMetric(r.wall.Seconds(), "s-wall")
		b.ReportMetric(float64(steps)/r.wall.Seconds(), "steps/s")
		b.ReportMetric((cpu - cpu0).Seconds(), "s-controller-cpu")
		b.ReportMetric((api - api0).Seconds(), "s-apiserver-cpu")
		b.ReportMetric(float64(len(r.parts)), "parts")
		b.ReportMetric(float64(largest), "B-largest-part")
		b.ReportMetric(perNode, "B/node")
	}
}

// TestArgoSplitFailure: in a flow split into parts (a small argo_max_bytes),
// a step that fails fails its part's Workflow and the part's task in the
// parent, and the parent; argo.Failures finds the step across the parts; the
// steps after it never run, and parts that do not wait for it succeed.
func TestArgoSplitFailure(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	f, _ := testflows.SplitChains("split-fail", "busybox", sdk.Label(simcluster.LabelFail, "true"))
	p := testflows.Compile(t, f)
	p.ArgoMaxBytes = 5000
	r := runSplit(t, c, ns, p, 4*time.Minute)
	if len(r.parts) < 3 {
		t.Fatalf("%d parts ran, want 3 or more:\n%s", len(r.parts), r.describe())
	}
	if r.parent.Status.Phase != wfv1.WorkflowFailed {
		t.Fatalf("the parent ended %s, want Failed:\n%s", r.parent.Status.Phase, r.describe())
	}
	failures := argo.Failures(r.parent, r.parts)
	if len(failures) != 1 || failures[0].Step != "b2" {
		t.Fatalf("failures %+v, want step b2 alone:\n%s", failures, r.describe())
	}
	fail := failures[0]
	var failedPart *wfv1.Workflow
	for i := range r.parts {
		if r.parts[i].Name == fail.Workflow {
			failedPart = &r.parts[i]
		}
	}
	if failedPart == nil || failedPart.Status.Phase != wfv1.WorkflowFailed {
		t.Fatalf("the failure's Workflow %s is not a failed part:\n%s", fail.Workflow, r.describe())
	}
	// Argo's message for the parent's failed node is its executor's ("failure
	// condition … evaluated true"), which does not name the Workflow it
	// created: the part's task names the part, whose Workflow is found by
	// its labels, as argo.Failures finds it.
	if failedPart.Labels[argo.LabelPart] != fmt.Sprint(fail.Part) {
		t.Errorf("the failure's part %d, its Workflow's label %q", fail.Part, failedPart.Labels[argo.LabelPart])
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(r.parent.Status.Nodes)), func(n wfv1.NodeStatus) bool {
		return n.Type == wfv1.NodeTypePod && n.Phase == wfv1.NodeFailed && n.DisplayName == argo.PartTask(fail.Part)
	}) {
		t.Errorf("the parent's task of part %d did not fail:\n%s", fail.Part, r.describe())
	}
	largest, perNode := r.sizes(t)
	t.Logf("failure: %+v; largest part's Workflow %d bytes, %.0f bytes of status a node", fail, largest, perNode)
	ran := map[string]wfv1.NodePhase{}
	for _, part := range r.parts {
		for _, n := range part.Status.Nodes {
			if n.Type == wfv1.NodeTypePod {
				ran[argo.StepOfNode(&n)] = n.Phase
			}
		}
	}
	for _, s := range []string{"b3", "report"} {
		if phase, ok := ran[s]; ok {
			t.Errorf("step %s ran (%s) after b2 failed", s, phase)
		}
	}
	for _, s := range []string{"prepare", "a3", "c3"} {
		if ran[s] != wfv1.NodeSucceeded {
			t.Errorf("step %s: %q, want Succeeded (it does not wait for b2):\n%s", s, ran[s], r.describe())
		}
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: labelWorkflow + "=" + fail.Workflow})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
		return p.Labels[plan.LabelStep] == "b2" && p.Status.Phase == corev1.PodFailed
	}) {
		t.Errorf("no failed pod of step b2 in Workflow %s", fail.Workflow)
	}
}
