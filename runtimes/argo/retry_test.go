package argo

import (
	"slices"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRetried: the failed pod nodes of a run, and what follows them, are
// deleted; the retry node and the DAG above them are reset to running; a
// step retried to success by Argo, and one that succeeded, are kept as they
// are; the Workflow no longer reads as ended.
func TestRetried(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	node := func(id, display string, typ wfv1.NodeType, phase wfv1.NodePhase, children ...string) wfv1.NodeStatus {
		return wfv1.NodeStatus{ID: id, Name: "wf." + display, DisplayName: display, Type: typ, Phase: phase, Children: children, StartedAt: at, FinishedAt: at, Message: "m"}
	}
	wf := &wfv1.Workflow{
		ObjectMeta: metav1.ObjectMeta{Name: "wf", Labels: map[string]string{labelCompleted: "true", labelPhase: "Failed"}},
		Spec:       wfv1.WorkflowSpec{Shutdown: wfv1.ShutdownStrategyStop},
		Status: wfv1.WorkflowStatus{Phase: wfv1.WorkflowFailed, Message: "child failed", FinishedAt: at, Nodes: wfv1.Nodes{
			"wf":  node("wf", "wf", wfv1.NodeTypeDAG, wfv1.NodeFailed, "a", "x"),
			"a":   node("a", "a", wfv1.NodeTypePod, wfv1.NodeSucceeded, "b"),
			"b":   node("b", "b", wfv1.NodeTypeRetry, wfv1.NodeFailed, "b-0", "b-1"),
			"b-0": node("b-0", "b(0)", wfv1.NodeTypePod, wfv1.NodeFailed),
			"b-1": node("b-1", "b(1)", wfv1.NodeTypePod, wfv1.NodeFailed, "c"),
			"c":   node("c", "c", wfv1.NodeTypeSkipped, wfv1.NodeOmitted),
			"x":   node("x", "S1x", wfv1.NodeTypeRetry, wfv1.NodeSucceeded, "x-0", "x-1"),
			"x-0": node("x-0", "S1x(0)", wfv1.NodeTypePod, wfv1.NodeFailed),
			"x-1": node("x-1", "S1x(1)", wfv1.NodeTypePod, wfv1.NodeSucceeded),
		}},
	}
	now := at.Add(time.Hour)
	out, del, steps := retried(wf, now)
	if want := []string{"b"}; !slices.Equal(steps, want) {
		t.Errorf("steps run again %v; want %v", steps, want)
	}
	var deleted []string
	for id := range del {
		deleted = append(deleted, id)
	}
	slices.Sort(deleted)
	if diff := cmp.Diff([]string{"b-0", "b-1", "c"}, deleted); diff != "" {
		t.Errorf("deleted nodes (-want +got):\n%s", diff)
	}
	var kept []string
	for id := range out.Status.Nodes {
		kept = append(kept, id)
	}
	slices.Sort(kept)
	if diff := cmp.Diff([]string{"a", "b", "wf", "x", "x-0", "x-1"}, kept); diff != "" {
		t.Errorf("nodes kept (-want +got):\n%s", diff)
	}
	for id, want := range map[string]wfv1.NodePhase{"wf": wfv1.NodeRunning, "b": wfv1.NodeRunning, "a": wfv1.NodeSucceeded, "x": wfv1.NodeSucceeded} {
		if got := out.Status.Nodes[id].Phase; got != want {
			t.Errorf("node %s is %s; want %s", id, got, want)
		}
	}
	if b := out.Status.Nodes["b"]; len(b.Children) != 0 || !b.FinishedAt.IsZero() || b.Message != "" {
		t.Errorf("reset retry node b: %+v; want no children, no finish, no message", b)
	}
	if a := out.Status.Nodes["a"]; !slices.Equal(a.Children, []string{"b"}) || a.FinishedAt != at {
		t.Errorf("succeeded node a changed: %+v", a)
	}
	if out.Status.Phase != wfv1.WorkflowRunning || out.Status.Message != "" || !out.Status.FinishedAt.IsZero() ||
		out.Spec.Shutdown != "" || out.Labels[labelCompleted] != "" || out.Labels[labelPhase] != "Running" {
		t.Errorf("retried Workflow: phase %q, message %q, finished %v, shutdown %q, labels %v; want it running again",
			out.Status.Phase, out.Status.Message, out.Status.FinishedAt, out.Spec.Shutdown, out.Labels)
	}
	if wf.Status.Phase != wfv1.WorkflowFailed || len(wf.Status.Nodes) != 9 {
		t.Error("retried changed the Workflow it was given")
	}
}

// TestPodName: Argo's v2 pod names, as its controller made them on the
// simulated cluster (a node of workflow argo-life-k4p7j, template b).
func TestPodName(t *testing.T) {
	wf := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "argo-life-k4p7j"}}
	n := wfv1.NodeStatus{Name: "argo-life-k4p7j.b(0:index:0,value:x)", TemplateName: "b"}
	if got, want := podName(wf, n), "argo-life-k4p7j-b-3182824566"; got != want {
		t.Errorf("podName = %q; want %q", got, want)
	}
}

// TestLatestParts: of a parent's parts' Workflows, each part's newest one
// created since the parent's task of the part last started; after a retry of
// the parent, the failed part's old Workflow no longer counts, nor does any
// while the part's task has not started again; another run's parts never.
func TestLatestParts(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	parent := &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "wf"}, Status: wfv1.WorkflowStatus{Nodes: wfv1.Nodes{
		"wf":   {ID: "wf", Type: wfv1.NodeTypeDAG, StartedAt: at(0)},
		"wf-1": {ID: "wf-1", Type: wfv1.NodeTypePod, TemplateName: "p1", StartedAt: at(0)},
		// Part 2's task, retried: started again at 60s.
		"wf-2": {ID: "wf-2", Type: wfv1.NodeTypePod, TemplateName: "p2", StartedAt: metav1.NewTime(t0.Add(60*time.Second + 300*time.Millisecond))},
	}}}
	part := func(name, parentName, n string, created int) *wfv1.Workflow {
		return &wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at(created),
			Labels: map[string]string{LabelParentWorkflow: parentName, "manifold.dev/part": n}}}
	}
	parts := []*wfv1.Workflow{
		part("wf-p2-old", "wf", "2", 1),
		part("wf-p1-a", "wf", "1", 1),
		part("wf-p2-new", "wf", "2", 60),
		part("other-p1-x", "other", "1", 2),
		part("wf-p3-old", "wf", "3", 5), // its task was reset by the retry
	}
	var got []string
	for _, w := range latestParts(parent, parts) {
		got = append(got, w.Name)
	}
	if want := []string{"wf-p1-a", "wf-p2-new"}; !slices.Equal(got, want) {
		t.Errorf("latestParts = %v; want %v", got, want)
	}
	delete(parent.Status.Nodes, "wf-2")
	got = got[:0]
	for _, w := range latestParts(parent, parts) {
		got = append(got, w.Name)
	}
	if want := []string{"wf-p1-a"}; !slices.Equal(got, want) {
		t.Errorf("latestParts with part 2's task not started again = %v; want %v", got, want)
	}
}
