package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
