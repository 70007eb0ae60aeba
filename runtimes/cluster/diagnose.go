package cluster

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// PodFailure says why pod p of step s failed, as a run names it: the pod, its
// node, its container's reason and exit code (OOMKilled, exit 137), or the pod's
// own reason (Evicted, DeadlineExceeded). It returns the reason alone too, and
// the exit code (nil when no container ended).
func PodFailure(p *corev1.Pod, s *plan.Step) (string, string, *int) {
	where := "pod " + p.Name
	if p.Spec.NodeName != "" {
		where += " on node " + p.Spec.NodeName
	}
	if rank := PodRank(p); s.Nodes > 1 && rank != "" {
		where += " (rank " + rank + ")"
	}
	for _, cs := range p.Status.ContainerStatuses {
		t := cs.State.Terminated
		if t == nil || cs.Name != plan.ContainerName {
			continue
		}
		reason := t.Reason
		if reason == "" {
			reason = "Error"
		}
		msg := fmt.Sprintf("%s: %s (exit %d)", where, reason, t.ExitCode)
		if t.Message != "" {
			msg += ": " + strings.TrimSpace(t.Message)
		}
		if s.Body == plan.BodyRun && (t.ExitCode == 126 || t.ExitCode == 127 || reason == "StartError" || reason == "ContainerCannotRun") {
			msg += fmt.Sprintf("; the image %s does not seem to contain the flow program (%s): build the flow into the image or set sdk.Image", s.Image, s.Command[0])
		}
		code := int(t.ExitCode)
		return msg, reason, &code
	}
	reason, detail := p.Status.Reason, p.Status.Message
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
			continue
		}
		// The pod garbage collector fails the pods of a node that is gone
		// (reason and message as kube-controller-manager words them).
		if c.Reason == "DeletionByPodGC" && strings.Contains(c.Message, "node no longer exists") {
			return where + ": node deleted", ReasonNodeDeleted, nil
		}
		reason, detail = c.Reason, c.Message
	}
	if reason == "" {
		reason = string(p.Status.Phase)
	}
	msg := where + ": " + reason
	if detail != "" {
		msg += ": " + detail
	}
	return msg, reason, nil
}

// ReasonNodeDeleted is the reason recorded for a step whose pod failed because
// its node was deleted.
const ReasonNodeDeleted = "NodeDeleted"

// PodStarted reports whether p's step container runs or has run, so its log
// can be read.
func PodStarted(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == plan.ContainerName && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// PodRank returns the node rank of a pod of a multi-node step ("" for
// another pod).
func PodRank(p *corev1.Pod) string {
	return p.Annotations[emit.CompletionIndexAnnotation]
}
