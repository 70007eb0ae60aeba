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
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// roomyQuota admits every step of the examples at once.
var roomyQuota = corev1.ResourceList{
	corev1.ResourceCPU:          resource.MustParse("1000"),
	corev1.ResourceMemory:       resource.MustParse("100Ti"),
	"aws.amazon.com/neuron":     resource.MustParse("64"),
	"vpc.amazonaws.com/efa":     resource.MustParse("64"),
	"nvidia.com/gpu":            resource.MustParse("64"),
	"aws.amazon.com/neuroncore": resource.MustParse("64"),
}

// workload is the part of a Kueue Workload the tests read.
type workload struct {
	Name     string
	Owners   []metav1.OwnerReference
	PodSets  []kueuePodSet
	Priority *int32
	Class    string
	Conds    []metav1.Condition
	// Topology is whether Kueue assigned a pod set to topology domains.
	Topology bool
}

type kueuePodSet struct {
	Name            string `json:"name"`
	Count           int32  `json:"count"`
	TopologyRequest *struct {
		Required *string `json:"required"`
	} `json:"topologyRequest"`
}

func (w *workload) cond(typ string) *metav1.Condition {
	for i := range w.Conds {
		if w.Conds[i].Type == typ {
			return &w.Conds[i]
		}
	}
	return nil
}

// admitted reports whether Kueue admitted w (a finished Workload was).
func (w *workload) admitted() bool {
	for _, typ := range []string{"Admitted", "Finished"} {
		if c := w.cond(typ); c != nil && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// workloads lists the Workloads of namespace ns.
func workloads(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string) []workload {
	t.Helper()
	list, err := c.Dynamic.Resource(simcluster.WorkloadGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list Workloads: %v", err)
	}
	var out []workload
	for _, o := range list.Items {
		var w struct {
			Spec struct {
				PodSets          []kueuePodSet `json:"podSets"`
				Priority         *int32        `json:"priority"`
				PriorityClassRef *struct {
					Name string `json:"name"`
				} `json:"priorityClassRef"`
			} `json:"spec"`
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
				Admission  *struct {
					PodSetAssignments []struct {
						TopologyAssignment map[string]any `json:"topologyAssignment"`
					} `json:"podSetAssignments"`
				} `json:"admission"`
			} `json:"status"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &w); err != nil {
			t.Fatalf("Workload %s: %v", o.GetName(), err)
		}
		wl := workload{Name: o.GetName(), Owners: o.GetOwnerReferences(), PodSets: w.Spec.PodSets,
			Priority: w.Spec.Priority, Conds: w.Status.Conditions}
		if w.Spec.PriorityClassRef != nil {
			wl.Class = w.Spec.PriorityClassRef.Name
		}
		if a := w.Status.Admission; a != nil {
			for _, psa := range a.PodSetAssignments {
				wl.Topology = wl.Topology || psa.TopologyAssignment != nil
			}
		}
		out = append(out, wl)
	}
	return out
}

// ownedBy returns the Workload owned by the object with uid, or nil.
func ownedBy(wls []workload, uid types.UID) *workload {
	for i := range wls {
		for _, o := range wls[i].Owners {
			if o.UID == uid {
				return &wls[i]
			}
		}
	}
	return nil
}

// workloadOfPod returns the Workload Kueue admitted pod p under: the pod's own
// (Kueue's pod integration), its Job's, or its Job's JobSet's.
func workloadOfPod(ctx context.Context, t *testing.T, c *simcluster.Cluster, wls []workload, p corev1.Pod) *workload {
	t.Helper()
	if w := ownedBy(wls, p.UID); w != nil {
		return w
	}
	for _, o := range p.OwnerReferences {
		if o.Kind != "Job" {
			continue
		}
		if w := ownedBy(wls, o.UID); w != nil {
			return w
		}
		j, err := c.Client.BatchV1().Jobs(p.Namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get Job %s of pod %s: %v", o.Name, p.Name, err)
		}
		for _, jo := range j.OwnerReferences {
			if w := ownedBy(wls, jo.UID); w != nil {
				return w
			}
		}
	}
	return nil
}

// checkAdmitted: every pod that ran for a step was admitted by Kueue, and a
// multi-node step's pods all under one Workload (a gang) whose pod sets count
// all of them.
func checkAdmitted(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, e *example, r *jobRun) []string {
	t.Helper()
	wls := workloads(ctx, t, c, ns)
	var out []string
	for _, s := range e.Steps {
		gangs := map[string]bool{}
		for _, p := range r.pods[s.Name] {
			w := workloadOfPod(ctx, t, c, wls, p)
			switch {
			case w == nil:
				out = append(out, fmt.Sprintf("step %s: pod %s ran under no Kueue Workload", s.Name, p.Name))
				continue
			case !w.admitted():
				out = append(out, fmt.Sprintf("step %s: pod %s ran, its Workload %s is not admitted: %v", s.Name, p.Name, w.Name, w.Conds))
			}
			gangs[w.Name] = true
			if s.Nodes > 1 {
				n := int32(0)
				for _, ps := range w.PodSets {
					n += ps.Count
				}
				if n != int32(s.Nodes) {
					out = append(out, fmt.Sprintf("step %s: Workload %s admits %d pods, want the step's %d nodes at once", s.Name, w.Name, n, s.Nodes))
				}
			}
		}
		if s.Nodes > 1 && len(gangs) != 1 {
			out = append(out, fmt.Sprintf("step %s: its pods ran under %d Workloads %v, want one", s.Name, len(gangs), keys(gangs)))
		}
	}
	return out
}

// TestKueueAdmitsExamples runs neuron-train with `queue = "training"` on every
// target in a namespace Kueue manages, through a LocalQueue with room for all of
// it: the Jobs and JobSets are created suspended and run only once Kueue admits
// them, the Argo and Airflow single-node pods are held by Kueue's pod webhook
// until admitted; every step completes, every pod ran under an admitted Workload,
// and the 2-node step was admitted as one.
func TestKueueAdmitsExamples(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "neuron-train")
	defer lockTypes(e)()
	queued := *e
	queued.config = `queue = "training"`
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			ns := c.KueueNamespace(t)
			c.KueueQueue(t, ns, "training", roomyQuota)
			r := runTarget(t, c, ns, &queued, target)
			for _, check := range []func(*example, *jobRun) []string{checkComplete, checkPlacement, checkOrder, checkDistinctNodes} {
				for _, problem := range check(e, r) {
					t.Error(problem)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for _, problem := range checkAdmitted(ctx, t, c, ns, e, r) {
				t.Error(problem)
			}
		})
	}
}

// TestKueueHoldsSecondGang: a ClusterQueue with quota for 32 Neuron devices
// admits one 2-node trn1 step (2×16) and holds a second copy behind it, suspended
// and without pods, with Kueue's reason on its Workload; once the first finishes
// the second is admitted and runs on two nodes. On the job and jobset targets.
func TestKueueHoldsSecondGang(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "neuron-train")
	defer lockTypes(e)()
	v := *e
	v.config = "queue = \"training\"\n[labels]\n\"" + simcluster.LabelRunFor + "\" = \"4s\""
	quota := corev1.ResourceList{
		corev1.ResourceCPU:      resource.MustParse("1000"),
		corev1.ResourceMemory:   resource.MustParse("100Ti"),
		"aws.amazon.com/neuron": resource.MustParse("32"),
		"vpc.amazonaws.com/efa": resource.MustParse("16"),
	}
	for _, target := range []string{"job", "jobset"} {
		t.Run(target, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			ns := c.KueueNamespace(t)
			c.KueueQueue(t, ns, "training", quota)
			var first []*unstructured.Unstructured
			for _, o := range v.compileTarget(t, target) {
				if o.GetLabels()[plan.LabelStep] == "train" {
					first = append(first, o)
				}
			}
			preparePVCs(t, c, ns, first)
			gang := first[len(first)-1] // the Job or JobSet, after a Job's Service
			if k := gang.GetKind(); k != "Job" && k != "JobSet" {
				t.Fatalf("train's last object is a %s", k)
			}
			second := gang.DeepCopy()
			second.SetName(gang.GetName() + "-b")

			for _, o := range first {
				if _, err := c.Create(ctx, o, ns); err != nil {
					t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			a := waitWorkload(ctx, t, c, ns, gang, "the first gang to be admitted", func(w *workload) bool { return w.admitted() })
			if _, err := c.Create(ctx, second, ns); err != nil {
				t.Fatalf("create %s %s: %v", second.GetKind(), second.GetName(), err)
			}
			b := waitWorkload(ctx, t, c, ns, second, "Kueue to hold the second gang for quota", func(w *workload) bool {
				q := w.cond("QuotaReserved")
				return q != nil && q.Status == metav1.ConditionFalse && strings.Contains(q.Message, "quota")
			})
			t.Logf("Workload %s waits: %s", b.Name, b.cond("QuotaReserved").Message)
			if !strings.Contains(b.cond("QuotaReserved").Message, "aws.amazon.com/neuron") {
				t.Errorf("the second gang's reason does not name the Neuron devices it lacks: %s", b.cond("QuotaReserved").Message)
			}

			firstDone := waitDone(ctx, t, c, ns, gang)
			secondDone := waitDone(ctx, t, c, ns, second)
			wls := workloads(ctx, t, c, ns)
			if b = ownedBy(wls, uidOf(ctx, t, c, ns, second)); b == nil || !b.admitted() {
				t.Fatalf("the second gang completed, but its Workload was never admitted: %+v", b)
			}
			if qr := b.cond("QuotaReserved"); qr == nil || qr.LastTransitionTime.Before(&firstDone) {
				t.Errorf("the second gang got its quota at %v, before the first (Workload %s) finished at %v", qr, a.Name, firstDone)
			}
			pods := gangPods(ctx, t, c, ns, second)
			nodes := map[string]bool{}
			for _, p := range pods {
				if p.CreationTimestamp.Before(&firstDone) {
					t.Errorf("pod %s of the second gang was created at %v, before the first finished at %v", p.Name, p.CreationTimestamp, firstDone)
				}
				nodes[p.Spec.NodeName] = true
			}
			if len(pods) != 2 || len(nodes) != 2 {
				t.Errorf("the second gang ran %d pods on nodes %v, want 2 on two nodes", len(pods), keys(nodes))
			}
			t.Logf("first done %v, second done %v", firstDone.Time, secondDone.Time)
		})
	}
}

// TestKueuePriorityAndTopology: a step's sdk.Priority and sdk.Topology reach
// the Workload Kueue makes of its Job: the WorkloadPriorityClass and its value,
// and the pod set's required topology level, which Kueue's topology-aware
// scheduling honours when it admits the 2-node step into one zone.
func TestKueuePriorityAndTopology(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "neuron-train")
	defer lockTypes(e)()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := c.KueueNamespace(t)
	const level = "topology.kubernetes.io/zone"
	flavor := c.KueueTopologyQueue(t, ns, "training", "trn1.32xlarge", level, roomyQuota)
	class := ns + "-high"
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000}
	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), class, metav1.DeleteOptions{})
	})
	wpc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
		"metadata": map[string]any{"name": class}, "value": int64(700),
	}}
	if _, err := c.Dynamic.Resource(simcluster.WorkloadPriorityClassGVR).Create(ctx, wpc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Dynamic.Resource(simcluster.WorkloadPriorityClassGVR).Delete(context.Background(), class, metav1.DeleteOptions{})
	})

	f := sdk.NewFlow("ranked", sdk.Image("example.com/flow:v1"), sdk.Queue("training"),
		sdk.Label(simcluster.LabelRunFor, "2s")).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"),
			sdk.Trainium(16), sdk.EFA(8), sdk.Priority(class), sdk.Topology(level))
	p := testflows.Compile(t, f)
	s := p.Step("train")
	jobs := job.Jobs(p, s)
	if len(jobs) != 1 {
		t.Fatalf("train makes %d Jobs", len(jobs))
	}
	for _, o := range []any{job.Service(jobs[0]), jobs[0]} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(ctx, &unstructured.Unstructured{Object: u}, ns); err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	gang := &unstructured.Unstructured{}
	gang.SetKind("Job")
	gang.SetName(jobs[0].Name)
	w := waitWorkload(ctx, t, c, ns, gang, "the ranked step's Workload to be admitted", func(w *workload) bool { return w.admitted() })
	if w.Class != class || w.Priority == nil || *w.Priority != 700 {
		t.Errorf("Workload %s has priority class %q value %v, want %s 700 (the WorkloadPriorityClass's)", w.Name, w.Class, w.Priority, class)
	}
	if len(w.PodSets) != 1 || w.PodSets[0].TopologyRequest == nil || w.PodSets[0].TopologyRequest.Required == nil ||
		*w.PodSets[0].TopologyRequest.Required != level {
		t.Errorf("Workload %s pod sets %+v, want one requiring topology level %s", w.Name, w.PodSets, level)
	}
	if !w.Topology {
		t.Errorf("Workload %s was admitted without a topology assignment", w.Name)
	}
	waitDone(ctx, t, c, ns, gang)
	pods := gangPods(ctx, t, c, ns, gang)
	zones, nodes := map[string]bool{}, map[string]bool{}
	for _, p := range pods {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zones[n.Labels[level]] = true
		nodes[n.Name] = true
		if p.Spec.PriorityClassName != class {
			t.Errorf("pod %s has priorityClassName %q, want %s", p.Name, p.Spec.PriorityClassName, class)
		}
	}
	if len(pods) != 2 || len(nodes) != 2 || len(zones) != 1 {
		t.Errorf("the ranked step ran %d pods on nodes %v in zones %v, want 2 on two nodes of one zone", len(pods), keys(nodes), keys(zones))
	}
	t.Logf("admitted through flavor %s", flavor)
}

// uidOf returns the uid of the cluster's object o (a Job or JobSet).
func uidOf(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, o *unstructured.Unstructured) types.UID {
	t.Helper()
	if o.GetKind() == "Job" {
		j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get Job %s: %v", o.GetName(), err)
		}
		return j.UID
	}
	js, err := c.Dynamic.Resource(simcluster.JobSetGVR).Namespace(ns).Get(ctx, o.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get JobSet %s: %v", o.GetName(), err)
	}
	return js.GetUID()
}

// waitWorkload waits until the Workload of the Job or JobSet o satisfies ok
// and returns it.
func waitWorkload(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, o *unstructured.Unstructured, what string, ok func(*workload) bool) *workload {
	t.Helper()
	uid := uidOf(ctx, t, c, ns, o)
	var last *workload
	for {
		if w := ownedBy(workloads(ctx, t, c, ns), uid); w != nil {
			if ok(w) {
				return w
			}
			last = w
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s (%s %s): %v; its Workload: %+v", what, o.GetKind(), o.GetName(), ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitDone waits until the Job or JobSet o has completed and returns when its
// controller marked it so; a failure fails t.
func waitDone(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, o *unstructured.Unstructured) metav1.Time {
	t.Helper()
	for {
		conds, _ := gangConditions(ctx, t, c, ns, o)
		for _, cond := range conds {
			if cond.Status != metav1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case string(batchv1.JobComplete), "Completed":
				return cond.LastTransitionTime
			case string(batchv1.JobFailed):
				t.Fatalf("%s %s failed: %s: %s", o.GetKind(), o.GetName(), cond.Reason, cond.Message)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s %s to complete: %v; conditions %v", o.GetKind(), o.GetName(), ctx.Err(), conds)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// gangPods returns the pods of the Job or JobSet o.
func gangPods(ctx context.Context, t *testing.T, c *simcluster.Cluster, ns string, o *unstructured.Unstructured) []corev1.Pod {
	t.Helper()
	key := "batch.kubernetes.io/job-name"
	if o.GetKind() == "JobSet" {
		key = "jobset.sigs.k8s.io/jobset-name"
	}
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: key + "=" + o.GetName()})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(list.Items)
}
