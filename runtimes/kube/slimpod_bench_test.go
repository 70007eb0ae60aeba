package kube

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/manifoldflow/manifold/harness/benchenv"
	"github.com/manifoldflow/manifold/plan"
)

// itemPod is pod index of an Indexed Job's fan-out as the Job controller and
// a kubelet make it, ended: succeeded, or failed when failed is set.
func itemPod(index int, failed bool) *corev1.Pod {
	now := metav1.NewTime(time.Unix(1_800_000_000, 0))
	i := strconv.Itoa(index)
	phase, code, reason := corev1.PodSucceeded, int32(0), "Completed"
	if failed {
		phase, code, reason = corev1.PodFailed, 1, "Error"
	}
	cond := func(t corev1.PodConditionType, s corev1.ConditionStatus, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: now, Reason: reason}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "accel-process-" + i + "-" + fmt.Sprintf("%05x", index*7919%1048576), GenerateName: "accel-process-" + i + "-",
			Namespace: "default", UID: types.UID(fmt.Sprintf("0b5c%04x-2d1e-4c8a-9f00-%012x", index%65536, index)), ResourceVersion: strconv.Itoa(100000 + index),
			CreationTimestamp: now,
			Labels: map[string]string{
				batchv1.JobNameLabel: "accel-process", "job-name": "accel-process",
				batchv1.ControllerUidLabel: "7d6f0c1e-5b7a-4f55-9a43-1c2d3e4f5a6b", "controller-uid": "7d6f0c1e-5b7a-4f55-9a43-1c2d3e4f5a6b",
				batchv1.JobCompletionIndexAnnotation: i, plan.LabelFlow: "accel", plan.LabelRun: "r-20261207-abcdef", plan.LabelStep: "process",
			},
			Annotations:     map[string]string{batchv1.JobCompletionIndexAnnotation: i},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "accel-process", UID: "7d6f0c1e-5b7a-4f55-9a43-1c2d3e4f5a6b"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "kwok-node-" + strconv.Itoa(index%8), RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/accel:v1", Command: []string{"/manifold-flow", "step", "process"}}},
		},
		Status: corev1.PodStatus{
			Phase: phase, HostIP: "10.0.0.1", PodIP: "10.244.0." + strconv.Itoa(index%250), StartTime: &now,
			Conditions: []corev1.PodCondition{
				cond(corev1.PodReadyToStartContainers, corev1.ConditionFalse, ""), cond(corev1.PodInitialized, corev1.ConditionTrue, ""),
				cond(corev1.PodReady, corev1.ConditionFalse, "PodCompleted"), cond(corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted"),
				cond(corev1.PodScheduled, corev1.ConditionTrue, ""),
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "main", Image: "registry.example/accel:v1", ImageID: "registry.example/accel@sha256:0123", ContainerID: "containerd://" + fmt.Sprintf("%064x", index),
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: now, FinishedAt: now, ContainerID: "containerd://" + fmt.Sprintf("%064x", index)}},
			}},
		},
	}
}

// BenchmarkSlimPodCache measures what the pod informer's cache holds for each
// pod of a fan-out that ended (items/pod-cache, of which a tenth failed):
// MANIFOLD_BENCH_ITEMS pods (10,000 unless set) through the informer's
// transform into an indexer with the watcher's indexes, the live heap after
// a collection divided by the pods (B-live/pod).
//
//	go test -run '^$' -bench SlimPodCache -benchtime 1x ./runtimes/kube
func BenchmarkSlimPodCache(b *testing.B) {
	items := benchenv.Int(b, "MANIFOLD_BENCH_ITEMS", 10000, 1)
	pods := make([]*corev1.Pod, items)
	for i := range pods {
		pods[i] = itemPod(i, i%10 == 9)
	}
	var perPod float64
	b.ReportAllocs()
	for b.Loop() {
		before := liveHeap()
		store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{podOwnerIndex: podOwners})
		transform := newSlimmer().transform
		for _, p := range pods {
			obj, err := transform(p.DeepCopy())
			if err != nil {
				b.Fatal(err)
			}
			if err := store.Add(obj); err != nil {
				b.Fatal(err)
			}
		}
		perPod = float64(liveHeap()-before) / float64(items)
		runtime.KeepAlive(store)
	}
	b.ReportMetric(perPod, "B-live/pod")
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
