package argo_test

import (
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit/argo"
)

func TestStepOfNode(t *testing.T) {
	for _, c := range []struct {
		node wfv1.NodeStatus
		want string
	}{
		{wfv1.NodeStatus{Type: wfv1.NodeTypePod, DisplayName: "train"}, "train"},
		{wfv1.NodeStatus{Type: wfv1.NodeTypePod, DisplayName: `work(1:{"index":"1","value":"b"})`}, "work"},
		{wfv1.NodeStatus{Type: wfv1.NodeTypePod, DisplayName: "S3-eval(0)"}, "3-eval"},
		{wfv1.NodeStatus{Type: wfv1.NodeTypeRetry, DisplayName: "S3-eval"}, "3-eval"},
		{wfv1.NodeStatus{Type: wfv1.NodeTypePod, DisplayName: "train" + argo.ServiceSuffix}, "train"},
		{wfv1.NodeStatus{Type: wfv1.NodeTypeDAG, DisplayName: "flow-abcde"}, ""},
		{wfv1.NodeStatus{Type: wfv1.NodeTypeSkipped, DisplayName: "train"}, ""},
	} {
		if got := argo.StepOfNode(&c.node); got != c.want {
			t.Errorf("StepOfNode(%s %q) = %q, want %q", c.node.Type, c.node.DisplayName, got, c.want)
		}
	}
}

// node is a node of a Workflow's status, started at minute minute.
func node(typ wfv1.NodeType, display, template string, phase wfv1.NodePhase, minute int, children ...string) wfv1.NodeStatus {
	return wfv1.NodeStatus{
		Type: typ, DisplayName: display, TemplateName: template, Phase: phase, Children: children,
		Message:   string(phase) + " " + display,
		StartedAt: metav1.NewTime(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC)),
	}
}

// TestFailuresAcrossParts: the failed steps of a split flow's run are found in
// its parts' Workflows, by part; a retried attempt that a later one made good
// is not a failure; a part task that failed with no failed step is given
// without a step; Workflows of another parent are left out.
func TestFailuresAcrossParts(t *testing.T) {
	p := splitFlow(t, 6000)
	e := emitArgo(t, p)
	parentTemplate := e.templates[p.Name]
	parent := wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "splitme-x1"}}
	parent.Status.StoredWorkflowSpec = &parentTemplate.Spec
	parent.Status.Nodes = map[string]wfv1.NodeStatus{
		"splitme-x1":   node(wfv1.NodeTypeDAG, "splitme-x1", argo.Entrypoint, wfv1.NodeFailed, 0),
		"splitme-x1-1": node(wfv1.NodeTypePod, "p1", "p1", wfv1.NodeSucceeded, 1),
		"splitme-x1-2": node(wfv1.NodeTypePod, "p2", "p2", wfv1.NodeFailed, 2),
		"splitme-x1-3": node(wfv1.NodeTypePod, "p3", "p3", wfv1.NodeError, 2),
	}
	part := func(name, parentName, n string, nodes map[string]wfv1.NodeStatus) wfv1.Workflow {
		wf := wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{argo.LabelParentWorkflow: parentName, argo.LabelPart: n}}}
		wf.Status.Nodes = nodes
		return wf
	}
	parts := []wfv1.Workflow{
		part("splitme-x1-p2-aaaaa", "splitme-x1", "2", map[string]wfv1.NodeStatus{
			"a":  node(wfv1.NodeTypeRetry, "b1", "b1", wfv1.NodeSucceeded, 3, "a0", "a1"),
			"a0": node(wfv1.NodeTypePod, "b1(0)", "b1", wfv1.NodeFailed, 3),
			"a1": node(wfv1.NodeTypePod, "b1(1)", "b1", wfv1.NodeSucceeded, 4),
			"b":  node(wfv1.NodeTypeTaskGroup, "b2", "b2", wfv1.NodeFailed, 5, "b0"),
			"b0": node(wfv1.NodeTypePod, `b2(0:{"index":"0","value":"x"})`, "b2", wfv1.NodeFailed, 5),
			"c":  node(wfv1.NodeTypePod, "c1", "c1", wfv1.NodeError, 6),
		}),
		part("splitme-x1-p1-bbbbb", "splitme-x1", "1", map[string]wfv1.NodeStatus{
			"d": node(wfv1.NodeTypePod, "prepare", "prepare", wfv1.NodeSucceeded, 1),
		}),
		part("splitme-y2-p2-ccccc", "splitme-y2", "2", map[string]wfv1.NodeStatus{
			"e": node(wfv1.NodeTypePod, "a1", "a1", wfv1.NodeFailed, 1),
		}),
	}
	want := []argo.Failure{
		{Workflow: "splitme-x1-p2-aaaaa", Part: 2, Step: "b2", Node: "b0", Phase: "Failed", Message: `Failed b2(0:{"index":"0","value":"x"})`},
		{Workflow: "splitme-x1-p2-aaaaa", Part: 2, Step: "c1", Node: "c", Phase: "Error", Message: "Error c1"},
		{Workflow: "splitme-x1", Part: 3, Node: "splitme-x1-3", Phase: "Error", Message: "Error p3"},
	}
	if diff := cmp.Diff(want, argo.Failures(&parent, parts)); diff != "" {
		t.Errorf("Failures (-want +got):\n%s", diff)
	}

	// A flow run as one Workflow: its own failed nodes, a step named like a
	// part task included.
	one := wfv1.Workflow{ObjectMeta: metav1.ObjectMeta{Name: "small-z"}}
	one.Status.Nodes = map[string]wfv1.NodeStatus{"f": node(wfv1.NodeTypePod, "p1", "p1", wfv1.NodeFailed, 1)}
	want = []argo.Failure{{Workflow: "small-z", Step: "p1", Node: "f", Phase: "Failed", Message: "Failed p1"}}
	if diff := cmp.Diff(want, argo.Failures(&one, nil)); diff != "" {
		t.Errorf("Failures of one Workflow (-want +got):\n%s", diff)
	}
}
