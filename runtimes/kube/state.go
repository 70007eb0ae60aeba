package kube

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconst "sigs.k8s.io/jobset/pkg/constants"

	"github.com/manifoldflow/manifold/plan"
)

// observed is where a unit stands, read from the informer caches.
type observed struct {
	// exists is set once the cache holds the Job or JobSet.
	exists bool
	// created is when the Job or JobSet was made, ended when it ended (zero
	// while it runs, or when only its pods say it succeeded).
	created, ended  time.Time
	succeeded       bool
	failed          bool
	reason, message string // the Job's or JobSet's, when failed
	// attempt is the attempt running (or the last one).
	attempt int
	// pods are the unit's pods, all attempts; ready counts those running and ready.
	pods  []*corev1.Pod
	ready int
	nodes []string
	// stuck says why pods cannot start ("" when they can): the scheduler's
	// message, or a container that cannot get its image.
	stuck      string
	imageStuck bool
	// waiting is set for an item of a fan-out that has no pod while its Job
	// has made pods for others: it waits for its turn, not stuck.
	waiting bool
	// queued says why a Job or JobSet suspended for Kueue waits ("" when it is
	// not waiting for admission); kueueSaid is set when that is Kueue's word.
	queued    string
	kueueSaid bool
	// running is when the first container of a pod of the attempt started,
	// zero until one has.
	running time.Time
	// lastFailed is the pod whose failure ended the unit's last attempt
	// (failedPod), of its pods and of those gone from the caches since
	// (remember); nil for none. Only look sets it.
	lastFailed *corev1.Pod
}

// waitingReasons are container waiting reasons that do not go away by waiting.
var waitingReasons = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull", "CreateContainerConfigError", "CreateContainerError"}

// completed reports whether Job j has certainly succeeded before its controller
// says so: every completion it needs has a pod of this Job whose containers all
// exited 0 (or that is Succeeded). The Job controller marks the Job Complete a
// second or two later (after the kubelet has stopped the pod and the controller
// has batched its update); the step's successors need not wait for that.
func completed(j *batchv1.Job, pods []*corev1.Pod) bool {
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		return false
	}
	need := 1
	if j.Spec.Completions != nil {
		need = int(*j.Spec.Completions)
	}
	indexed := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
	done := map[string]bool{}
	for i, p := range pods {
		if p.Labels[batchv1.ControllerUidLabel] != string(j.UID) || p.Spec.RestartPolicy == corev1.RestartPolicyAlways || !exitedZero(p) {
			continue
		}
		key := strconv.Itoa(i) // a non-indexed Job counts every pod that succeeded
		if indexed {
			key = p.Annotations[batchv1.JobCompletionIndexAnnotation]
		}
		done[key] = true
	}
	return len(done) >= need
}

// jobSetCompleted reports whether JobSet obj, restarted restarts times, has
// certainly succeeded before its controller says so, as completed does for a
// Job: under JobSet's default success policy (every Job of every replicated
// job completes), every completion index of every Job of the current restart
// attempt has a pod of this JobSet whose containers all exited 0. The JobSet
// controller marks it Completed only after the Job controller has marked each
// Job Complete, seconds later.
func jobSetCompleted(obj *unstructured.Unstructured, restarts int, pods []*corev1.Pod) bool {
	// The pods first: until one has exited 0 there is no need to read the
	// JobSet's spec, which is most of the times a unit is looked at.
	done := map[string]bool{}
	attempt := strconv.Itoa(restarts)
	for _, p := range pods {
		if p.Labels[jobsetv1.JobSetUIDKey] != string(obj.GetUID()) || p.Labels[jobsetconst.RestartsKey] != attempt ||
			p.Spec.RestartPolicy == corev1.RestartPolicyAlways || !exitedZero(p) {
			continue
		}
		done[p.Labels[jobsetv1.ReplicatedJobNameKey]+"/"+p.Labels[jobsetv1.JobIndexKey]+"/"+p.Annotations[batchv1.JobCompletionIndexAnnotation]] = true
	}
	if len(done) == 0 {
		return false
	}
	var js jobsetv1.JobSet
	if runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &js) != nil {
		return false
	}
	if js.Spec.Suspend != nil && *js.Spec.Suspend || len(js.Spec.ReplicatedJobs) == 0 {
		return false
	}
	// Another success policy (Any, or some of the replicated jobs) is left to
	// the controller; Manifold emits the default.
	if sp := js.Spec.SuccessPolicy; sp != nil && (sp.Operator != jobsetv1.OperatorAll || len(sp.TargetReplicatedJobs) > 0) {
		return false
	}
	for _, rj := range js.Spec.ReplicatedJobs {
		if m := rj.Template.Spec.CompletionMode; m == nil || *m != batchv1.IndexedCompletion {
			return false // Manifold's JobSets run Indexed Jobs; others are left to the controllers
		}
		completions := 1
		if c := rj.Template.Spec.Completions; c != nil {
			completions = int(*c)
		}
		for k := range int(rj.Replicas) {
			for i := range completions {
				if !done[rj.Name+"/"+strconv.Itoa(k)+"/"+strconv.Itoa(i)] {
					return false
				}
			}
		}
	}
	return true
}

// exitedZero reports whether pod p has succeeded, or all its containers have
// exited 0 (the kubelet is still stopping it).
func exitedZero(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if p.Status.Phase == corev1.PodFailed || len(p.Status.ContainerStatuses) < len(p.Spec.Containers) || len(p.Spec.Containers) == 0 {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if t := c.State.Terminated; t == nil || t.ExitCode != 0 {
			return false
		}
	}
	return true
}

// observe reads unit u's state from the caches: its object's, as its
// workload reads it, then its pods', oldest first.
func (r *runner) observe(u *unit) observed {
	var ob observed
	if !u.workload.read(r.w, u, &ob) {
		return ob
	}
	sortPods(ob.pods)
	for _, p := range ob.pods {
		ob.addPod(p, u.Step)
	}
	sort.Strings(ob.nodes)
	return ob
}

// look is observe for the run's loop, which acts on what it returns: it
// also keeps the state of u's pods (remember), and names the pod whose
// failure ended u's last attempt in lastFailed.
func (r *runner) look(u *unit) observed {
	ob := r.observe(u)
	if ob.exists {
		ob.lastFailed = failedPod(u.remember(ob.pods))
	}
	return ob
}

// end records that the unit's object ended at at: it succeeded, or it failed
// with reason and message.
func (ob *observed) end(at time.Time, succeeded bool, reason, message string) {
	ob.ended = at
	if succeeded {
		ob.succeeded = true
	} else {
		ob.failed, ob.reason, ob.message = true, reason, message
	}
}

// sortPods orders pods by creation, then name.
func sortPods(pods []*corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
			return a.CreationTimestamp.Before(&b.CreationTimestamp)
		}
		return a.Name < b.Name
	})
}

// addPod adds to ob what pod p of step s says, unless it is deleted or has
// failed: its node, whether it is ready, when its first container started,
// and, while it is pending, why it cannot start (pending).
func (ob *observed) addPod(p *corev1.Pod, s *plan.Step) {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
		return
	}
	if p.Spec.NodeName != "" && !slices.Contains(ob.nodes, p.Spec.NodeName) {
		ob.nodes = append(ob.nodes, p.Spec.NodeName)
	}
	if p.Status.Phase == corev1.PodRunning && podReady(p) {
		ob.ready++
	}
	if at := firstStart(p); !at.IsZero() && (ob.running.IsZero() || at.Before(ob.running)) {
		ob.running = at
	}
	if p.Status.Phase == corev1.PodPending {
		ob.pending(p, s)
	}
}

// firstStart returns when the first of pod p's containers started, zero
// until one has.
func firstStart(p *corev1.Pod) time.Time {
	var first time.Time
	for _, cs := range p.Status.ContainerStatuses {
		var at metav1.Time
		switch {
		case cs.State.Running != nil:
			at = cs.State.Running.StartedAt
		case cs.State.Terminated != nil:
			at = cs.State.Terminated.StartedAt
		}
		if !at.IsZero() && (first.IsZero() || at.Time.Before(first)) {
			first = at.Time
		}
	}
	return first
}

// pending sets ob.stuck when pending pod p of step s cannot start: the
// scheduler cannot place it (the first such pod is named), or a container
// waits for a reason that waiting does not cure (waitingReasons), which also
// sets ob.imageStuck.
func (ob *observed) pending(p *corev1.Pod, s *plan.Step) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && ob.stuck == "" {
			ob.stuck = fmt.Sprintf("pod %s cannot be scheduled: %s", p.Name, c.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && slices.Contains(waitingReasons, w.Reason) {
			ob.stuck = fmt.Sprintf("pod %s on node %s: %s: %s", p.Name, p.Spec.NodeName, w.Reason, w.Message)
			if s.Body == plan.BodyRun {
				ob.stuck += "; this Run step's image must contain the flow program (" + s.Image + ")"
			}
			ob.imageStuck = true
		}
	}
}

// podReady reports whether pod p's Ready condition is true.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// failedPod returns the pod whose failure ended the unit's last attempt: the
// failed pod that finished last, or nil.
func failedPod(pods []*corev1.Pod) *corev1.Pod {
	var last *corev1.Pod
	var lastAt metav1.Time
	for _, p := range pods {
		if p.Status.Phase != corev1.PodFailed {
			continue
		}
		at := p.CreationTimestamp
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
				at = t.FinishedAt
			}
		}
		if last == nil || !at.Before(&lastAt) {
			last, lastAt = p, at
		}
	}
	return last
}

// remember keeps the last state of each of unit u's pods the caches show, and
// returns pods (the unit's pods in the caches) with those that have left the
// caches since, as last seen: a pod deleted before it ended is shown failed,
// "Deleted". The pod garbage collector deletes the pods of a deleted node as
// soon as it has failed them, and the Job controller counts that failure
// after: without them the failure could not say which pod failed, or where.
func (u *unit) remember(pods []*corev1.Pod) []*corev1.Pod {
	if u.last == nil {
		u.last = map[string]*corev1.Pod{}
	}
	out := slices.Clone(pods)
	for _, p := range pods {
		u.last[p.Name] = p
	}
	for name, p := range u.last {
		if slices.ContainsFunc(pods, func(q *corev1.Pod) bool { return q.Name == name }) {
			continue
		}
		if p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			p = p.DeepCopy()
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Deleted", "the pod was deleted before it ended"
		}
		out = append(out, p)
	}
	return out
}

// nodeSummary shows the nodes a unit runs on: one, or the first and how many more.
func nodeSummary(nodes []string) string {
	switch len(nodes) {
	case 0:
		return ""
	case 1:
		return nodes[0]
	}
	return nodes[0] + " +" + strconv.Itoa(len(nodes)-1)
}
