package kube

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
