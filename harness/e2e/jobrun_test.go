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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// jobRun is what happened when a flow's Jobs or JobSets (or an Argo Workflow's
// steps) ran on the cluster.
type jobRun struct {
	// order lists the steps as their Jobs were created.
	order []string
	// created and done are when the runner created a step's Jobs and saw all of
	// them Complete (its own clock, so the two compare exactly); for a Workflow,
	// when Argo started and finished the step's node.
	created, done map[string]time.Time
	// failed holds the steps whose Jobs failed, with the Job's reason.
	// restarts holds, for a JobSet that failed, how often the JobSet controller
	// had restarted it.
	restarts map[string]int
	failed   map[string]string
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

// runOrdered runs job or jobset target output as those targets say to: each
// step's objects (Jobs, a multi-node step's Service, or JobSets) are created once
// the steps in its manifold.dev/after annotation have completed. It stops when
// every step is done, or when nothing more can start (a step failed or cannot be
// scheduled). Creation errors fail t: every object must be accepted by the API
// server.
func runOrdered(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) *jobRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r := &jobRun{
		created: map[string]time.Time{}, done: map[string]time.Time{},
		failed: map[string]string{}, pending: map[string]string{}, restarts: map[string]int{},
		pods: map[string][]corev1.Pod{}, nodeType: nodeTypes(t, c),
	}
	var steps []string
	byStep := map[string][]*unstructured.Unstructured{}
	after := map[string][]string{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Job", "JobSet", "Service", "ResourceClaimTemplate":
		default:
			t.Fatalf("job or jobset target output holds a %s", o.GetKind())
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
					t.Fatalf("step %s: the API server refused a %s: %v", s, o.GetKind(), err)
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
			complete, failure, restarts := stepState(ctx, t, c, ns, byStep[s])
			switch {
			case failure != "":
				r.failed[s] = failure
				r.restarts[s] = restarts
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
			t.Fatalf("running the steps: %v (created %v, done %v)", ctx.Err(), r.order, keys(r.done))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stepState reports whether every Job and JobSet of a step has completed, or
// why one failed (and, for a JobSet, after how many restarts).
func stepState(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) (bool, string, int) {
	t.Helper()
	complete := true
	for _, o := range objs {
		if k := o.GetKind(); k != "Job" && k != "JobSet" {
			continue
		}
		conds, restarts := gangConditions(ctx, t, c, ns, o)
		done := false
		for _, cond := range conds {
			if cond.Status != metav1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case string(batchv1.JobFailed): // JobSet's condition has the same name
				return false, fmt.Sprintf("%s %s failed: %s: %s", o.GetKind(), o.GetName(), cond.Reason, cond.Message), restarts
			case string(batchv1.JobComplete), "Completed":
				done = true
			}
		}
		complete = complete && done
	}
	return complete, "", 0
}

// gangConditions returns the conditions of the Job or JobSet o as the cluster
// has it and, for a JobSet, how often its controller has restarted it.
func gangConditions(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, o *unstructured.Unstructured) ([]metav1.Condition, int) {
	t.Helper()
	if o.GetKind() == "Job" {
		j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get Job %s: %v", o.GetName(), err)
		}
		var conds []metav1.Condition
		for _, cond := range j.Status.Conditions {
			conds = append(conds, metav1.Condition{Type: string(cond.Type), Status: metav1.ConditionStatus(cond.Status),
				Reason: cond.Reason, Message: cond.Message, LastTransitionTime: cond.LastTransitionTime})
		}
		return conds, 0
	}
	js, err := c.Dynamic.Resource(simcluster.JobSetGVR).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get JobSet %s: %v", o.GetName(), err)
	}
	var status struct {
		Conditions []metav1.Condition `json:"conditions"`
		Restarts   int                `json:"restarts"`
	}
	if st, ok := js.Object["status"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &status); err != nil {
			t.Fatalf("JobSet %s status: %v", o.GetName(), err)
		}
	}
	return status.Conditions, status.Restarts
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
	seen := map[string]bool{}
	for _, o := range objs {
		for _, v := range podVolumes(t, o) {
			if v.PersistentVolumeClaim == nil || seen[v.PersistentVolumeClaim.ClaimName] {
				continue
			}
			claim := v.PersistentVolumeClaim.ClaimName
			seen[claim] = true
			if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), claim, metav1.GetOptions{}); err == nil {
				continue // the test made it (a real node's shared directory)
			}
			c.BoundClaim(t, ns, claim)
		}
	}
}

// prepareClaims creates, in namespace ns, the ResourceClaimTemplates among
// objs, as a user applies <flow>.claims.yaml beside an argo or airflow target's
// output: the templates its DRA steps' pods claim from.
func prepareClaims(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured) {
	t.Helper()
	createKind(t, c, ns, objs, "ResourceClaimTemplate")
}

// createKind creates, in namespace ns, the objects of kind among objs.
func createKind(t *testing.T, c *simcluster.Cluster, ns string, objs []*unstructured.Unstructured, kind string) {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != kind {
			continue
		}
		if _, err := c.Create(context.Background(), o, ns); err != nil {
			t.Fatalf("the API server refused the %s %s: %v", kind, o.GetName(), err)
		}
	}
}

// podVolumes returns the volumes of the pods a Job or JobSet makes.
func podVolumes(t *testing.T, o *unstructured.Unstructured) []corev1.Volume {
	t.Helper()
	var templates []any
	switch o.GetKind() {
	case "Job":
		templates = []any{o.Object["spec"].(map[string]any)["template"]}
	case "JobSet":
		rjs, _, _ := unstructured.NestedSlice(o.Object, "spec", "replicatedJobs")
		for _, rj := range rjs {
			tpl, _, _ := unstructured.NestedFieldNoCopy(rj.(map[string]any), "template", "spec", "template")
			templates = append(templates, tpl)
		}
	}
	var out []corev1.Volume
	for _, tpl := range templates {
		m, ok := tpl.(map[string]any)
		if !ok {
			t.Fatalf("%s %s: no pod template", o.GetKind(), o.GetName())
		}
		var pt corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &pt); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		out = append(out, pt.Spec.Volumes...)
	}
	return out
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
		if o.GetKind() == "Job" && o.GetLabels()[plan.LabelStep] == s {
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

// labelPods returns objs with label key=value added to the pods that step s's
// objects make: the pod template of its Jobs, of each replicated Job of its
// JobSets, or of its template in a WorkflowTemplate.
func labelPods(t *testing.T, objs []*unstructured.Unstructured, s, key, value string) []*unstructured.Unstructured {
	t.Helper()
	out := make([]*unstructured.Unstructured, len(objs))
	found := false
	set := func(m map[string]any, path ...string) {
		if err := unstructured.SetNestedField(m, value, append(path, "metadata", "labels", key)...); err != nil {
			t.Fatal(err)
		}
		found = true
	}
	for i, o := range objs {
		o = o.DeepCopy()
		out[i] = o
		switch {
		case o.GetKind() == "Job" && o.GetLabels()[plan.LabelStep] == s:
			set(o.Object, "spec", "template")
		case o.GetKind() == "JobSet" && o.GetLabels()[plan.LabelStep] == s:
			rjs, _, _ := unstructured.NestedSlice(o.Object, "spec", "replicatedJobs")
			for _, rj := range rjs {
				set(rj.(map[string]any), "template", "spec", "template")
			}
			if err := unstructured.SetNestedSlice(o.Object, rjs, "spec", "replicatedJobs"); err != nil {
				t.Fatal(err)
			}
		case o.GetKind() == "WorkflowTemplate":
			tpls, _, _ := unstructured.NestedSlice(o.Object, "spec", "templates")
			for _, tpl := range tpls {
				// The argo target names a step's template after the step.
				if tpl.(map[string]any)["name"] == s {
					set(tpl.(map[string]any))
				}
			}
			if err := unstructured.SetNestedSlice(o.Object, tpls, "spec", "templates"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !found {
		t.Fatalf("no pods of step %s to label", s)
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
