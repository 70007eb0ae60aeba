package kube

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconst "sigs.k8s.io/jobset/pkg/constants"

	"github.com/manifoldflow/manifold/plan"
)

// TestSlimPod: the pod informer keeps of a pod what the runner reads — its
// identity, times, the labels of its Job or JobSet, its completion index, its
// node, restart policy, containers' names and images, and its phase, reason,
// message, conditions and containers' states — and nothing else; the strings
// the pods of one Job share are one copy.
func TestSlimPod(t *testing.T) {
	now := metav1.Now()
	exit := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "boom", StartedAt: now}}
	full := func(index string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: "f-each-" + index + "-x", GenerateName: "f-each-" + index + "-", Namespace: "ns", UID: types.UID("uid-p" + index), ResourceVersion: "7",
				CreationTimestamp: now, DeletionTimestamp: &now,
				Labels: map[string]string{
					batchv1.JobNameLabel: "f-each", batchv1.ControllerUidLabel: "job-uid", plan.LabelFlow: "f", plan.LabelRun: "r",
					jobsetv1.JobSetNameKey: "js", jobsetv1.JobSetUIDKey: "js-uid", jobsetv1.ReplicatedJobNameKey: "item-0",
					jobsetv1.JobIndexKey: "0", jobsetconst.RestartsKey: "1", batchv1.JobCompletionIndexAnnotation: index,
				},
				Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: index, "other": "x"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Job", Name: "f-each", UID: "job-uid"}},
				Finalizers:      []string{batchv1.JobTrackingFinalizer},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
			},
			Spec: corev1.PodSpec{
				NodeName: "node-1", RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: "sa",
				Containers: []corev1.Container{{Name: "main", Image: "img:v1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Command: []string{"run"}}},
				Volumes:    []corev1.Volume{{Name: "items"}},
			},
			Status: corev1.PodStatus{
				Phase: corev1.PodFailed, Reason: "Evicted", Message: "gone", PodIP: "10.0.0.1", HostIP: "10.0.0.2", QOSClass: corev1.PodQOSBurstable,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Message: "ok"}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: exit, Image: "img:v1", ImageID: "sha256:abc", ContainerID: "containerd://1", RestartCount: 2}},
			},
		}
	}
	sl := newSlimmer()
	got := sl.slimPod(full("3"))
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "f-each-3-x", Namespace: "ns", UID: "uid-p3", ResourceVersion: "7", CreationTimestamp: now, DeletionTimestamp: &now,
			Labels: map[string]string{
				batchv1.JobNameLabel: "f-each", batchv1.ControllerUidLabel: "job-uid",
				jobsetv1.JobSetNameKey: "js", jobsetv1.JobSetUIDKey: "js-uid", jobsetv1.ReplicatedJobNameKey: "item-0",
				jobsetv1.JobIndexKey: "0", jobsetconst.RestartsKey: "1",
			},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "3"},
		},
		Spec: corev1.PodSpec{NodeName: "node-1", RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "main", Image: "img:v1"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: "Evicted", Message: "gone",
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Message: "ok"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: exit}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slim pod (-want +got):\n%s", diff)
	}
	// An item of a fan-out (a pod of an Indexed Job, of no JobSet) is still
	// found by its Job and index.
	item := full("5")
	for _, key := range []string{jobsetv1.JobSetNameKey, jobsetv1.JobSetUIDKey, jobsetv1.ReplicatedJobNameKey, jobsetv1.JobIndexKey, jobsetconst.RestartsKey} {
		delete(item.Labels, key)
	}
	if job, index, ok := podIndex(sl.slimPod(item)); !ok || job != "f-each" || index != "5" {
		t.Errorf("podIndex of the slim pod: %q, %q, %v; want f-each, 3", job, index, ok)
	}
	// Two pods of one Job share their labels and their containers.
	other := sl.slimPod(full("4"))
	if reflect.ValueOf(got.Labels).UnsafePointer() != reflect.ValueOf(other.Labels).UnsafePointer() {
		t.Errorf("the pods of one Job hold two maps of their labels")
	}
	if &got.Spec.Containers[0] != &other.Spec.Containers[0] {
		t.Errorf("the pods of one Job hold two copies of their containers")
	}
	a, b := got.Status.ContainerStatuses[0].Name, other.Status.ContainerStatuses[0].Name
	if unsafeData(a) != unsafeData(b) {
		t.Errorf("the pods of one Job hold two copies of their container's name")
	}
	// A pod of another Job has its own labels.
	third := full("5")
	third.Labels[batchv1.ControllerUidLabel] = "job-uid-2"
	if l := sl.slimPod(third).Labels; l[batchv1.ControllerUidLabel] != "job-uid-2" || got.Labels[batchv1.ControllerUidLabel] != "job-uid" {
		t.Errorf("pods of two Jobs: labels %v and %v", got.Labels, l)
	}
	// A pod that succeeded keeps of its status only its phase and how its
	// containers ended.
	done := full("6")
	done.Status.Phase, done.Status.Reason, done.Status.Message = corev1.PodSucceeded, "", "done"
	done.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", Message: "all well", StartedAt: now, FinishedAt: now, ContainerID: "containerd://1",
	}}
	wantStatus := corev1.PodStatus{
		Phase: corev1.PodSucceeded,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now,
		}}}},
	}
	slimDone := sl.slimPod(done)
	if diff := cmp.Diff(wantStatus, slimDone.Status); diff != "" {
		t.Errorf("status of a slim pod that succeeded (-want +got):\n%s", diff)
	}
	if !exitedZero(slimDone) || firstStart(slimDone).IsZero() {
		t.Errorf("a slim pod that succeeded: exited zero %v, started %v; want both", exitedZero(slimDone), firstStart(slimDone))
	}
	// Any other object only loses its managed fields.
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	out, err := sl.transform(j)
	if err != nil || out.(*batchv1.Job).ManagedFields != nil || out.(*batchv1.Job).Labels["a"] != "b" {
		t.Errorf("the transform of a Job: %+v, %v; want its labels kept, its managed fields dropped", out, err)
	}
}

// unsafeData is the address of s's bytes.
func unsafeData(s string) *byte { return unsafe.StringData(s) }
