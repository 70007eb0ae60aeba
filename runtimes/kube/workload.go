package kube

import (
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
)

// workload is the kind of object a unit runs as, a Job (jobWorkload) or a
// JobSet (jobSetWorkload); each kind reads its own object's status.
type workload interface {
	// read fills in ob what the caches hold of unit u's object: when it was
	// created and ended, how it ended, the attempt, the unit's pods and why it
	// waits for Kueue. It returns false, leaving ob alone, while the caches do
	// not hold the object.
	read(w *watcher, u *unit, ob *observed) bool
}

// jobWorkload is the workload of a unit made as a batch/v1 Job.
type jobWorkload struct{}

// jobSetWorkload is the workload of a unit made as a JobSet.
type jobSetWorkload struct{}

var (
	_ workload = jobWorkload{}
	_ workload = jobSetWorkload{}
)

// read fills ob from unit u's Job: its Complete or Failed condition, its
// failed pods counted as attempts that ended (at most the step's retries and
// one), and its pods.
func (jobWorkload) read(w *watcher, u *unit, ob *observed) bool {
	j := w.job(u.ns, u.name)
	if j == nil {
		return false
	}
	ob.exists, ob.created = true, j.CreationTimestamp.Time
	if c := jobEnd(j); c != nil {
		ob.end(c.LastTransitionTime.Time, c.Type == batchv1.JobComplete, c.Reason, c.Message)
	}
	ob.attempt = min(int(j.Status.Failed)+1, u.Step.Retry+1)
	if ob.failed {
		ob.attempt = max(1, min(int(j.Status.Failed), u.Step.Retry+1))
	}
	ob.pods = w.pods(u.ns, batchv1.JobNameLabel, u.name)
	if !ob.succeeded && !ob.failed && completed(j, ob.pods) {
		ob.succeeded = true
	}
	if u.Step.Queue != "" && j.Spec.Suspend != nil && *j.Spec.Suspend {
		ob.queued, ob.kueueSaid = w.queued(u.ns, j.UID, u.Step.Queue)
	}
	return true
}

// jobSetStatus is what the runtime reads of a JobSet's status.
type jobSetStatus struct {
	Conditions []metav1.Condition `json:"conditions"`
	Restarts   int                `json:"restarts"`
}

// read fills ob from unit u's JobSet: its Completed or Failed condition, its
// restarts counted as attempts, and its pods.
func (jobSetWorkload) read(w *watcher, u *unit, ob *observed) bool {
	js := w.jobSet(u.ns, u.name)
	if js == nil {
		return false
	}
	ob.exists, ob.created = true, js.GetCreationTimestamp().Time
	var status jobSetStatus
	if st, ok := js.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &status)
	}
	for _, c := range status.Conditions {
		if c.Status == metav1.ConditionTrue && (c.Type == "Completed" || c.Type == "Failed") {
			ob.end(c.LastTransitionTime.Time, c.Type == "Completed", c.Reason, c.Message)
		}
	}
	ob.attempt = status.Restarts + 1
	ob.pods = w.pods(u.ns, jobsetv1.JobSetNameKey, u.name)
	if !ob.succeeded && !ob.failed && jobSetCompleted(js, status.Restarts, ob.pods) {
		ob.succeeded = true
	}
	if suspended, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend"); suspended && u.Step.Queue != "" {
		ob.queued, ob.kueueSaid = w.queued(u.ns, js.GetUID(), u.Step.Queue)
	}
	return true
}
