package kube

import (
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconst "sigs.k8s.io/jobset/pkg/constants"
)

// TestCompleted: a Job has succeeded once every completion it needs has a pod of
// its own whose containers all exited 0 (or that is Succeeded), before its
// controller says so; never on a failed container, a pod of another Job, a
// suspended Job or a completion still missing.
func TestCompleted(t *testing.T) {
	pod := func(uid, index string, phase corev1.PodPhase, codes ...int32) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Labels:      map[string]string{batchv1.ControllerUidLabel: uid},
				Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: index},
			},
			Spec:   corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever},
			Status: corev1.PodStatus{Phase: phase},
		}
		for i, code := range codes {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i))})
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}},
			})
		}
		if len(codes) == 0 {
			p.Spec.Containers = []corev1.Container{{Name: "main"}}
		}
		return p
	}
	job := func(completions int32, indexed, suspended bool) *batchv1.Job {
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{UID: "u1"}}
		if completions > 0 {
			j.Spec.Completions = &completions
		}
		if indexed {
			j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
		}
		j.Spec.Suspend = &suspended
		return j
	}
	for _, tt := range []struct {
		name string
		job  *batchv1.Job
		pods []*corev1.Pod
		want bool
	}{
		{"exited 0, still running", job(0, false, false), []*corev1.Pod{pod("u1", "", corev1.PodRunning, 0)}, true},
		{"succeeded", job(1, false, false), []*corev1.Pod{pod("u1", "", corev1.PodSucceeded)}, true},
		{"exited 1", job(1, false, false), []*corev1.Pod{pod("u1", "", corev1.PodRunning, 1)}, false},
		{"one container of two exited", job(1, false, false), []*corev1.Pod{pod("u1", "", corev1.PodRunning, 0, 1)}, false},
		{"failed, then a retry exited 0", job(1, false, false), []*corev1.Pod{pod("u1", "", corev1.PodFailed, 1), pod("u1", "", corev1.PodRunning, 0)}, true},
		{"another Job's pod", job(1, false, false), []*corev1.Pod{pod("u2", "", corev1.PodSucceeded)}, false},
		{"suspended", job(1, false, true), []*corev1.Pod{pod("u1", "", corev1.PodSucceeded)}, false},
		{"one index of two", job(2, true, false), []*corev1.Pod{pod("u1", "0", corev1.PodSucceeded), pod("u1", "0", corev1.PodRunning, 0)}, false},
		{"both indexes", job(2, true, false), []*corev1.Pod{pod("u1", "0", corev1.PodSucceeded), pod("u1", "1", corev1.PodRunning, 0)}, true},
		{"no pods", job(1, false, false), nil, false},
	} {
		if got := completed(tt.job, tt.pods); got != tt.want {
			t.Errorf("%s: completed = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestJobSetCompleted: a JobSet has succeeded once every completion index of
// every Job of every replicated job has, in the current restart attempt, a pod
// of this JobSet whose containers all exited 0; never with an index or a
// replicated job still missing, a pod of an earlier attempt or of another
// JobSet, a failed container, a suspended JobSet or another success policy.
func TestJobSetCompleted(t *testing.T) {
	pod := func(uid, rjob, job, index, attempt string, code int32) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Labels: map[string]string{
					jobsetv1.JobSetUIDKey: uid, jobsetv1.ReplicatedJobNameKey: rjob,
					jobsetv1.JobIndexKey: job, jobsetconst.RestartsKey: attempt,
				},
				Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: index},
			},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}},
			}}},
		}
	}
	// jobSet has replicated jobs "a" (one Job of two indexes) and, with items,
	// "b" (two Jobs of one index).
	jobSet := func(change func(*jobsetv1.JobSet)) *unstructured.Unstructured {
		js := &jobsetv1.JobSet{
			ObjectMeta: metav1.ObjectMeta{UID: "u1"},
			Spec: jobsetv1.JobSetSpec{ReplicatedJobs: []jobsetv1.ReplicatedJob{
				{Name: "a", Replicas: 1, Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Completions: new(int32(2)), CompletionMode: new(batchv1.IndexedCompletion)}}},
			}},
		}
		if change != nil {
			change(js)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(js)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: u}
	}
	both := []*corev1.Pod{pod("u1", "a", "0", "0", "1", 0), pod("u1", "a", "0", "1", "1", 0)}
	for _, tt := range []struct {
		name     string
		js       *unstructured.Unstructured
		restarts int
		pods     []*corev1.Pod
		want     bool
	}{
		{"both indexes exited 0", jobSet(nil), 1, both, true},
		{"one index of two", jobSet(nil), 1, both[:1], false},
		{"an index exited 1", jobSet(nil), 1, []*corev1.Pod{both[0], pod("u1", "a", "0", "1", "1", 1)}, false},
		{"an index only in an earlier attempt", jobSet(nil), 1, []*corev1.Pod{both[0], pod("u1", "a", "0", "1", "0", 0)}, false},
		{"another JobSet's pods", jobSet(nil), 1, []*corev1.Pod{pod("u2", "a", "0", "0", "1", 0), pod("u2", "a", "0", "1", "1", 0)}, false},
		{"suspended", jobSet(func(js *jobsetv1.JobSet) { js.Spec.Suspend = new(true) }), 1, both, false},
		{"success policy Any", jobSet(func(js *jobsetv1.JobSet) {
			js.Spec.SuccessPolicy = &jobsetv1.SuccessPolicy{Operator: jobsetv1.OperatorAny}
		}), 1, both, false},
		{"a second replicated job of two Jobs, one done", jobSet(func(js *jobsetv1.JobSet) {
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobsetv1.ReplicatedJob{Name: "b", Replicas: 2,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{CompletionMode: new(batchv1.IndexedCompletion)}}})
		}), 1, append(slices.Clone(both), pod("u1", "b", "1", "0", "1", 0)), false},
		{"a second replicated job of two Jobs, both done", jobSet(func(js *jobsetv1.JobSet) {
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, jobsetv1.ReplicatedJob{Name: "b", Replicas: 2,
				Template: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{CompletionMode: new(batchv1.IndexedCompletion)}}})
		}), 1, append(slices.Clone(both), pod("u1", "b", "1", "0", "1", 0), pod("u1", "b", "0", "0", "1", 0)), true},
		{"no pods", jobSet(nil), 0, nil, false},
	} {
		if got := jobSetCompleted(tt.js, tt.restarts, tt.pods); got != tt.want {
			t.Errorf("%s: jobSetCompleted = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPodOwners: the run's pods are indexed by the labels that name their Job
// and their JobSet, and by nothing else.
func TestPodOwners(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		batchv1.JobNameLabel: "greet-1", jobsetv1.JobSetNameKey: "greet", "app": "x",
	}}}
	keys, err := podOwners(p)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{batchv1.JobNameLabel + "=greet-1", jobsetv1.JobSetNameKey + "=greet"}
	if !slices.Equal(keys, want) {
		t.Errorf("podOwners = %q, want %q", keys, want)
	}
	if keys, _ := podOwners(&corev1.Pod{}); len(keys) != 0 {
		t.Errorf("a pod of no Job: podOwners = %q, want none", keys)
	}
}
