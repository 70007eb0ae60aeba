package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/plan"
	rcluster "github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// TestAdopted: a unit taken over from a killed runner, whose record the resume
// rewrote as pending, is recorded with the attempt its Job is at and the Job's
// start, so that its next attempt is not taken for a retry and its time is
// not counted from the zero time; one that succeeded meanwhile gets its end
// (the Job's, or now when only its pods say so) and exit 0.
func TestAdopted(t *testing.T) {
	made := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := made.Add(time.Minute)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-1"}}

	var running record.Task
	adopted(&running, observed{exists: true, created: made, attempt: 2, nodes: []string{"n1"}, pods: []*corev1.Pod{pod}}, now)
	if running.State != record.Running || running.Attempts != 2 || !running.Start.Equal(made) || !running.End.IsZero() ||
		running.Node != "n1" || len(running.Pods) != 1 || running.ExitCode != nil {
		t.Errorf("running unit adopted as %+v", running)
	}

	done := record.Task{Error: "stale", Reason: "Stale"}
	adopted(&done, observed{exists: true, created: made, ended: made.Add(10 * time.Second), succeeded: true, attempt: 1}, now)
	if done.State != record.Succeeded || done.Attempts != 1 || !done.Start.Equal(made) || !done.End.Equal(made.Add(10*time.Second)) ||
		done.ExitCode == nil || *done.ExitCode != 0 || done.Error != "" || done.Reason != "" {
		t.Errorf("succeeded unit adopted as %+v", done)
	}

	// Its pods say it succeeded; the Job's controller has not said so yet.
	var early record.Task
	adopted(&early, observed{exists: true, created: made, succeeded: true, attempt: 1}, now)
	if !early.End.Equal(now) {
		t.Errorf("unit succeeded by its pods ends at %v; want now, %v", early.End, now)
	}

	// A start the record kept is the unit's first.
	kept := record.Task{Start: made.Add(-time.Hour)}
	adopted(&kept, observed{exists: true, created: made, attempt: 1}, now)
	if !kept.Start.Equal(made.Add(-time.Hour)) {
		t.Errorf("the recorded start %v was replaced by %v", made.Add(-time.Hour), kept.Start)
	}
}

// TestNodeDeletedFailure: a pod the pod garbage collector failed because its
// node is gone, and deleted at once, still tells why the step failed, naming
// the pod and the node; a pod deleted before it ended, unseen to fail, is
// told as deleted.
func TestNodeDeletedFailure(t *testing.T) {
	s := &plan.Step{Name: "work"}
	running := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "work-1"},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: plan.ContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: plan.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
		}},
	}
	collected := running.DeepCopy()
	collected.Status.Phase = corev1.PodFailed
	collected.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists",
	}}

	u := &unit{}
	u.remember([]*corev1.Pod{running})
	u.remember([]*corev1.Pod{collected})
	pods := u.remember(nil) // the collector deleted it
	p := failedPod(pods)
	if p == nil {
		t.Fatal("no failed pod among the pods the unit saw")
	}
	msg, reason, code := rcluster.PodFailure(p, s)
	if msg != "pod work-1 on node n1: node deleted" || reason != rcluster.ReasonNodeDeleted || code != nil {
		t.Errorf("podFailure: %q, %q, %v", msg, reason, code)
	}

	u = &unit{}
	u.remember([]*corev1.Pod{running})
	p = failedPod(u.remember(nil))
	if p == nil {
		t.Fatal("a pod deleted while it ran is not told as failed")
	}
	if msg, reason, _ := rcluster.PodFailure(p, s); msg != "pod work-1 on node n1: Deleted: the pod was deleted before it ended" || reason != "Deleted" {
		t.Errorf("podFailure of a deleted pod: %q, %q", msg, reason)
	}
	if running.Status.Phase != corev1.PodRunning {
		t.Error("remember changed the cached pod")
	}

	// Other disruptions say what they are.
	evicted := running.DeepCopy()
	evicted.Status.Phase = corev1.PodFailed
	evicted.Status.Conditions = []corev1.PodCondition{{
		Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler", Message: "preempted by a pod of higher priority",
	}}
	if msg, _, _ := rcluster.PodFailure(evicted, s); msg != "pod work-1 on node n1: PreemptionByScheduler: preempted by a pod of higher priority" {
		t.Errorf("podFailure of a preempted pod: %q", msg)
	}
}
