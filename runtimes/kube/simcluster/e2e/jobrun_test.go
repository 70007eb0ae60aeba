package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube/simcluster"
)

// jobRun is what happened when a flow's Jobs were run on the cluster.
type jobRun struct {
	// order lists the steps as their Jobs were created.
	order []string
	// created and done are when the runner created a step's Jobs and saw all of
	// them Complete (its own clock, so the two compare exactly).
	created, done map[string]time.Time
	// failed holds the steps whose Jobs failed, with the Job's reason.
	failed map[string]string
	// pending holds the steps whose pods the scheduler could not place, with its
	// message.
	pending map[string]string
	// pods are each step's pods as the cluster ran them.
	pods map[string][]corev1.Pod
	// nodeType maps node name to its instance type label.
	nodeType map[string]string
}

// pendingGrace is how long a pod must stay unschedulable before the runner
// concludes it never will be scheduled.
const pendingGrace = 5 * time.Second

// runJobs runs Job target output as the Job target says to: each step's Jobs are
// created once the Jobs of the steps in its manifold.dev/after annotation have
// completed. It stops when every step is done, or when nothing more can start
// (a step failed or cannot be scheduled). Creation errors fail t: every object
// must be accepted by the API server.
func runJobs(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) *jobRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &jobRun{
		created: map[string]time.Time{}, done: map[string]time.Time{},
		failed: map[string]string{}, pending: map[string]string{},
		pods: map[string][]corev1.Pod{}, nodeType: nodeTypes(t, c),
	}
	var steps []string
	byStep := map[string][]*unstructured.Unstructured{}
	after := map[string][]string{}
	for _, o := range objs {
		if o.GetKind() != "Job" {
			t.Fatalf("Job target output holds a %s", o.GetKind())
		}
		s := o.GetLabels()[plan.LabelStep]
		if _, seen := byStep[s]; !seen {
			steps = append(steps, s)
		}
		byStep[s] = append(byStep[s], o)
		if a := o.GetAnnotations()[plan.AnnotationAfter]; a != "" {
			after[s] = strings.Split(a, ",")
		}
	}
	preparePVCs(t, c, ns, objs)
	ready := func(s string) bool {
		for _, a := range after[s] {
			if _, ok := r.done[a]; !ok {
				return false
			}
		}
		return true
	}
	finished := func(s string) bool {
		_, ok := r.done[s]
		return ok || r.failed[s] != "" || r.pending[s] != ""
	}

	unschedulableSince := map[string]time.Time{}
	for {
		for _, s := range steps {
			if _, ok := r.created[s]; ok || !ready(s) {
				continue
			}
			for _, o := range byStep[s] {
				if _, err := c.Create(ctx, o, ns); err != nil {
					t.Fatalf("step %s: the API server refused a Job: %v", s, err)
				}
			}
			r.created[s] = time.Now()
			r.order = append(r.order, s)
		}
		running := 0
		for _, s := range r.order {
			if finished(s) {
				continue
			}
			complete, failure := jobsState(ctx, t, c, ns, byStep[s])
			switch {
			case failure != "":
				r.failed[s] = failure
			case complete:
				r.done[s] = time.Now()
			default:
				msg := unschedulable(ctx, t, c, ns, s)
				switch since, seen := unschedulableSince[s]; {
				case msg == "":
					delete(unschedulableSince, s)
					running++
				case !seen:
					unschedulableSince[s] = time.Now()
					running++
				case time.Since(since) > pendingGrace:
					r.pending[s] = msg
				default:
					running++
				}
			}
			if finished(s) {
				r.pods[s] = stepPods(ctx, t, c, ns, s)
			}
		}
		startable := slices.ContainsFunc(steps, func(s string) bool {
			_, created := r.created[s]
			return !created && ready(s)
		})
		if running == 0 && !startable {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("running the Jobs: %v (created %v, done %v)", ctx.Err(), r.order, keys(r.done))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// jobsState reports whether every Job has completed, or why one failed.
func jobsState(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) (bool, string) {
	t.Helper()
	complete := true
	for _, o := range objs {
		j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get Job %s: %v", o.GetName(), err)
		}
		done := false
		for _, cond := range j.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobFailed:
				return false, fmt.Sprintf("Job %s failed: %s: %s", j.Name, cond.Reason, cond.Message)
			case batchv1.JobComplete:
				done = true
			}
		}
		complete = complete && done
	}
	return complete, ""
}

// unschedulable returns the scheduler's message for a pod of step s it could not
// place, or "".
func unschedulable(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns, s string) string {
	t.Helper()
	for _, p := range stepPods(ctx, t, c, ns, s) {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return cond.Message
			}
		}
	}
	return ""
}

func stepPods(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns, s string) []corev1.Pod {
	t.Helper()
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelStep + "=" + s})
	if err != nil {
		t.Fatalf("list pods of step %s: %v", s, err)
	}
	return list.Items
}

func nodeTypes(t *testing.T, c *simcluster.Cluster) map[string]string {
	t.Helper()
	list, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, n := range list.Items {
		m[n.Name] = n.Labels[plan.LabelInstanceType]
	}
	return m
}

// preparePVCs creates, for every claim the pods mount, a PersistentVolume and a
// claim bound to it, as a cluster's storage would provide; the scheduler does not
// place pods whose claims are unbound.
func preparePVCs(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	for _, o := range objs {
		for _, v := range toJob(t, o).Spec.Template.Spec.Volumes {
			if v.PersistentVolumeClaim == nil || seen[v.PersistentVolumeClaim.ClaimName] {
				continue
			}
			claim := v.PersistentVolumeClaim.ClaimName
			seen[claim] = true
			size := resource.MustParse("1Ti")
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + claim}},
					ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: claim},
				},
			}
			if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
			})
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					StorageClassName: new(""),
					VolumeName:       pv.Name,
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
				},
			}
			if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func toJob(t *testing.T, o *unstructured.Unstructured) *batchv1.Job {
	t.Helper()
	var j batchv1.Job
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &j); err != nil {
		t.Fatalf("%s: %v", o.GetName(), err)
	}
	return &j
}

func fromJob(t *testing.T, j *batchv1.Job) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(j)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// mutate returns objs with f applied to the Jobs of step s.
func mutate(t *testing.T, objs []*unstructured.Unstructured, s string, f func(*batchv1.Job)) []*unstructured.Unstructured {
	t.Helper()
	out := make([]*unstructured.Unstructured, len(objs))
	found := false
	for i, o := range objs {
		out[i] = o
		if o.GetLabels()[plan.LabelStep] == s {
			j := toJob(t, o)
			f(j)
			out[i] = fromJob(t, j)
			found = true
		}
	}
	if !found {
		t.Fatalf("no Job of step %s", s)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
