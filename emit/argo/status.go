package argo

import (
	"slices"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
)

// StepOfTask returns the step that DAG task runs: TaskName in reverse, and a
// multi-node step's Service task (ServiceSuffix) is its step's.
func StepOfTask(task string) string {
	task = strings.TrimSuffix(task, ServiceSuffix)
	if len(task) > 1 && task[0] == 'S' && task[1] >= '0' && task[1] <= '9' {
		return task[1:]
	}
	return task
}

// StepOfNode returns the step a node of a flow's Workflow (or of one of its
// parts' Workflows) runs, from the node's displayName ("train", or a foreach
// item's "train(0:{...})", a retry attempt's "train(1)"); "" for a node of
// no step (the Workflow's own, its DAG's). On a parent's Workflow a node is
// a part task, named PartTask.
func StepOfNode(n *wfv1.NodeStatus) string {
	switch n.Type {
	case wfv1.NodeTypePod, wfv1.NodeTypeRetry, wfv1.NodeTypeTaskGroup:
	default:
		return ""
	}
	task, _, _ := strings.Cut(n.DisplayName, "(")
	return StepOfTask(task)
}

// Failure is a failed node of a flow's run.
type Failure struct {
	// Workflow is the Workflow holding the node: the one run, or the part's
	// for a split flow.
	Workflow string
	// Part is the part's number (LabelPart); 0 for a flow run as one Workflow.
	Part int
	// Step is the step the node ran; "" when the node is a parent's part task
	// that failed with no failed step (its Workflow could not be created).
	Step string
	// Node is the node's ID in the Workflow's status (the pod's name is
	// derived from it), Phase its phase and Message why it ended so.
	Node, Phase, Message string
}

// Failures returns the failed steps of a run: the failed Pod nodes of wf, or,
// when wf runs a split flow's parts (IsParent), of parts, the Workflows that
// wf created (those labelled LabelParentWorkflow with wf's name; others are
// left out), ordered by part and then by when each started. A part task of wf
// that failed with no failed step in its part (as when its Workflow could not
// be created) is given with Step "". An attempt of a retried step that failed
// before one succeeded is not a failure.
func Failures(wf *wfv1.Workflow, parts []wfv1.Workflow) []Failure {
	if !IsParent(wf) {
		return failures(wf, 0)
	}
	var out []Failure
	failedParts := map[int]bool{}
	for i := range parts {
		p := &parts[i]
		if p.Labels[LabelParentWorkflow] != wf.Name {
			continue
		}
		n, _ := strconv.Atoi(p.Labels[LabelPart])
		fs := failures(p, n)
		if len(fs) > 0 {
			failedParts[n] = true
		}
		out = append(out, fs...)
	}
	for _, id := range sortedNodes(wf) {
		node := wf.Status.Nodes[id]
		if node.Type != wfv1.NodeTypePod || !failed(node.Phase) {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimPrefix(node.TemplateName, "p")); err == nil && !failedParts[n] {
			out = append(out, Failure{Workflow: wf.Name, Part: n, Node: id, Phase: string(node.Phase), Message: node.Message})
		}
	}
	slices.SortStableFunc(out, func(a, b Failure) int { return a.Part - b.Part })
	return out
}

// IsParent reports whether wf is a Workflow of a split flow's parent
// WorkflowTemplate: one whose templates create the parts' Workflows.
func IsParent(wf *wfv1.Workflow) bool {
	spec := wf.Status.StoredWorkflowSpec
	if spec == nil {
		spec = &wf.Spec
	}
	return slices.ContainsFunc(spec.Templates, func(t wfv1.Template) bool {
		return t.Resource != nil && strings.Contains(t.Resource.Manifest, `"`+LabelParentWorkflow+`"`)
	})
}

// failures returns the failed step nodes of wf, part n.
func failures(wf *wfv1.Workflow, n int) []Failure {
	var out []Failure
	for _, id := range sortedNodes(wf) {
		node := wf.Status.Nodes[id]
		if node.Type != wfv1.NodeTypePod || !failed(node.Phase) {
			continue
		}
		// A retried attempt counts only when its retry node failed too.
		if parent, ok := retryParent(wf, id); ok && !failed(parent.Phase) {
			continue
		}
		out = append(out, Failure{Workflow: wf.Name, Part: n, Step: StepOfNode(&node), Node: id, Phase: string(node.Phase), Message: node.Message})
	}
	return out
}

// retryParent returns the Retry node whose child node id is.
func retryParent(wf *wfv1.Workflow, id string) (wfv1.NodeStatus, bool) {
	for _, n := range wf.Status.Nodes {
		if n.Type == wfv1.NodeTypeRetry && slices.Contains(n.Children, id) {
			return n, true
		}
	}
	return wfv1.NodeStatus{}, false
}

func failed(p wfv1.NodePhase) bool { return p == wfv1.NodeFailed || p == wfv1.NodeError }

// sortedNodes returns the IDs of wf's nodes by start time, then ID.
func sortedNodes(wf *wfv1.Workflow) []string {
	ids := make([]string, 0, len(wf.Status.Nodes))
	for id := range wf.Status.Nodes {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := wf.Status.Nodes[a].StartedAt.Compare(wf.Status.Nodes[b].StartedAt.Time); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return ids
}
