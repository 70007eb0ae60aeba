package argo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
)

// Status is a run of the flow on the cluster as Show tells it.
type Status struct {
	Summary
	// Suspended is whether the Workflow is suspended.
	Suspended bool
	// Parts are the Workflows of a split flow's parts.
	Parts []string
	// Steps has a row per step, or per item of a foreach step, in flow order;
	// those that have not started are left out.
	Steps []StepStatus
}

// StepStatus is one step, or foreach item, of a run as Show tells it.
type StepStatus struct {
	Step  string
	Index int // -1 for a whole step
	// Label names it: the step, or step[index].
	Label    string
	Phase    string
	Attempts int
	Started  time.Time
	Finished time.Time
	// Pod and Node are its last attempt's; Message is Argo's word on it.
	Pod, Node, Message string
}

// Show returns Workflow name, a run of the flow, with its steps.
func (c *Client) Show(ctx context.Context, name string) (*Status, error) {
	wfs, err := c.workflows(ctx, name)
	if err != nil {
		return nil, err
	}
	root := wfs[0]
	st := &Status{Summary: Summary{Name: root.Name, Phase: string(root.Status.Phase), Started: root.CreationTimestamp.Time,
		Finished: root.Status.FinishedAt.Time, Message: root.Status.Message, Progress: string(root.Status.Progress)}}
	if st.Phase == "" {
		st.Phase = "Pending"
	}
	st.Suspended = root.Spec.Suspend != nil && *root.Spec.Suspend
	pods, err := c.podsOf(ctx, wfs)
	if err != nil {
		return nil, err
	}
	for i, w := range wfs {
		if i > 0 {
			st.Parts = append(st.Parts, w.Name)
		}
		walk(c.f, w, func(s *plan.Step, index int, top wfv1.NodeStatus, attempts []wfv1.NodeStatus) {
			row := StepStatus{Step: s.Name, Index: index, Label: s.Name, Phase: string(top.Phase), Attempts: len(attempts),
				Started: top.StartedAt.Time, Finished: top.FinishedAt.Time, Message: top.Message}
			if index >= 0 {
				row.Label += "[" + strconv.Itoa(index) + "]"
			}
			if len(attempts) > 0 {
				last := attempts[len(attempts)-1]
				row.Node, row.Pod = last.HostNodeName, podName(w, last)
				if p := pods[last.ID]; p != nil {
					if p.Status.Phase == corev1.PodFailed {
						row.Message, _, _ = cluster.PodFailure(p, s)
					}
				}
			}
			st.Steps = append(st.Steps, row)
		})
	}
	order := map[string]int{}
	for i := range c.f.Steps {
		order[c.f.Steps[i].Name] = i
	}
	slices.SortFunc(st.Steps, func(a, b StepStatus) int {
		if d := order[a.Step] - order[b.Step]; d != 0 {
			return d
		}
		return a.Index - b.Index
	})
	return st, nil
}

// workflows returns Workflow name, a run of the flow, then the Workflows of
// its parts: the newest of each part (latestParts).
func (c *Client) workflows(ctx context.Context, name string) ([]*wfv1.Workflow, error) {
	root, err := c.workflow(ctx, name)
	if err != nil {
		return nil, err
	}
	list, err := c.conn.Dynamic.Resource(WorkflowGVR).Namespace(c.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelParentWorkflow + "=" + name})
	if err != nil {
		return nil, err
	}
	var parts []*wfv1.Workflow
	for i := range list.Items {
		w, err := toWorkflow(&list.Items[i])
		if err != nil {
			return nil, err
		}
		parts = append(parts, w)
	}
	return append([]*wfv1.Workflow{root}, latestParts(root, parts)...), nil
}

// latestParts returns, of the Workflows parts, those that run the parts of
// parent's run now, in part order: for each part (emit/argo's LabelPart) the
// newest Workflow that parent (LabelParentWorkflow) created since its task
// of the part (PartTask) last started; none while that task has not started.
// A part has more than one Workflow when the parent was retried: Argo's
// retry of a parent's failed part task deletes the task's node and starts
// it anew, which creates the part's Workflow anew, running every step of the
// part from the start, and the Workflow it replaces stays as it ended.
func latestParts(parent *wfv1.Workflow, parts []*wfv1.Workflow) []*wfv1.Workflow {
	started := map[string]time.Time{}
	for _, n := range parent.Status.Nodes {
		if n.Type == wfv1.NodeTypePod {
			started[n.TemplateName] = n.StartedAt.Time
		}
	}
	newest := map[int]*wfv1.Workflow{}
	for _, w := range parts {
		if w.Labels[LabelParentWorkflow] != parent.Name {
			continue
		}
		n, err := strconv.Atoi(w.Labels[eargo.LabelPart])
		if err != nil {
			continue
		}
		// Both times are in whole seconds.
		at, ok := started[eargo.PartTask(n)]
		if !ok || w.CreationTimestamp.Time.Before(at.Truncate(time.Second)) {
			continue
		}
		if old, ok := newest[n]; !ok || newer(w, old) {
			newest[n] = w
		}
	}
	out := make([]*wfv1.Workflow, 0, len(newest))
	for _, n := range slices.Sorted(maps.Keys(newest)) {
		out = append(out, newest[n])
	}
	return out
}

// newer reports whether Workflow a was created after b (by name when in the
// same second).
func newer(a, b *wfv1.Workflow) bool {
	if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
		return c > 0
	}
	return a.Name > b.Name
}

// podsOf returns the pods of Workflows wfs still on the cluster, by node ID.
func (c *Client) podsOf(ctx context.Context, wfs []*wfv1.Workflow) (map[string]*corev1.Pod, error) {
	pods := map[string]*corev1.Pod{}
	for _, w := range wfs {
		list, err := c.conn.Client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: labelWorkflow + "=" + w.Name})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if id := p.Annotations[annotationNodeID]; id != "" {
				pods[id] = p
			}
		}
	}
	return pods, nil
}

// Logs writes to w what the pods of Workflow name (a run of the flow) wrote,
// step by step in flow order and attempt by attempt, each line prefixed with
// its step (or item) as while the run went on; only step's when step is not "".
// A pod that is gone (Argo's pod garbage collection) is named as such.
func (c *Client) Logs(ctx context.Context, name, step string, w io.Writer) error {
	if step != "" && c.f.Step(step) == nil {
		return fmt.Errorf("flow %s has no step %q", c.f.Name, step)
	}
	wfs, err := c.workflows(ctx, name)
	if err != nil {
		return err
	}
	pods, err := c.podsOf(ctx, wfs)
	if err != nil {
		return err
	}
	parts, pad := c.logParts(wfs, step)
	if len(parts) == 0 {
		if step != "" {
			return fmt.Errorf("step %s of Workflow %s has not started", step, name)
		}
		return fmt.Errorf("no step of Workflow %s has started", name)
	}
	return c.writeLogs(ctx, w, parts, pods, pad)
}

// logPart is a step, or one item of a foreach step, whose pods Logs writes
// what they wrote: its label, and the attempts of Workflow wf that ran it.
type logPart struct {
	label     string
	s         *plan.Step
	index     int
	attempts  []wfv1.NodeStatus
	wf        *wfv1.Workflow
	stepOrder int
}

// logParts returns the parts of Workflows wfs that ran a step (step's alone
// when step is not ""), in flow order and item by item, and the width of the
// longest label.
func (c *Client) logParts(wfs []*wfv1.Workflow, step string) ([]logPart, int) {
	order := map[string]int{}
	labels := []string{}
	for i := range c.f.Steps {
		order[c.f.Steps[i].Name] = i
	}
	var parts []logPart
	for _, wf := range wfs {
		walk(c.f, wf, func(s *plan.Step, index int, _ wfv1.NodeStatus, attempts []wfv1.NodeStatus) {
			if step != "" && s.Name != step {
				return
			}
			label := s.Name
			if index >= 0 {
				label += "[" + strconv.Itoa(index) + "]"
			}
			labels = append(labels, label)
			parts = append(parts, logPart{label, s, index, attempts, wf, order[s.Name]})
		})
	}
	slices.SortFunc(parts, func(a, b logPart) int {
		if a.stepOrder != b.stepOrder {
			return a.stepOrder - b.stepOrder
		}
		return a.index - b.index
	})
	pad := 0
	for _, l := range labels {
		pad = max(pad, len(l))
	}
	return parts, pad
}

// writeLogs writes to w what the pods of parts wrote, attempt by attempt, each
// line prefixed with its part's label padded to pad; pods holds the pods by
// the ID of the node that runs each.
func (c *Client) writeLogs(ctx context.Context, w io.Writer, parts []logPart, pods map[string]*corev1.Pod, pad int) error {
	var errs []error
	for _, p := range parts {
		for k, a := range p.attempts {
			pod := pods[a.ID]
			if len(p.attempts) > 1 {
				fmt.Fprintf(w, "%s: %s\n", p.label, dag.AttemptOf(k+1, len(p.attempts)))
			}
			if pod == nil {
				fmt.Fprintf(w, "%s: pod %s is no longer on the cluster (Argo's pod garbage collection, or deleted)\n", p.label, podName(p.wf, a))
				continue
			}
			if !cluster.PodStarted(pod) {
				fmt.Fprintf(w, "%s: pod %s has not started\n", p.label, pod.Name)
				continue
			}
			// Streamed as it is read: a log can be larger than memory.
			rc, err := c.conn.Client.CoreV1().Pods(c.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: plan.ContainerName}).Stream(ctx)
			if err == nil {
				_, err = display.CopyPrefixed(w, rc, p.label, pad)
				rc.Close()
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("logs of pod %s (%s): %w", pod.Name, p.label, err))
			}
		}
	}
	return errors.Join(errs...)
}
