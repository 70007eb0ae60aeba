package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
)

// Kueue's kinds, in the version Kueue v0.17.0 serves and stores.
var (
	localQueueGVR            = kueueGVR("localqueues")
	clusterQueueGVR          = kueueGVR("clusterqueues")
	workloadGVR              = kueueGVR("workloads")
	workloadPriorityClassGVR = kueueGVR("workloadpriorityclasses")
)

func kueueGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
}

// kueueServed reports whether the cluster serves Kueue's Workloads, asking once.
func (c *cluster) kueueServed() (bool, error) {
	if c.kueue == nil {
		served, err := c.Serves(workloadGVR)
		if err != nil {
			return false, err
		}
		c.kueue = &served
	}
	return *c.kueue, nil
}

// queueProblem says why step s, whose objects go to namespace ns, would never be
// admitted or would be refused: Kueue not served, its LocalQueue missing, that
// queue's ClusterQueue missing or inactive, its PriorityClass missing, or (with a
// queue) its WorkloadPriorityClass missing. It returns "" when none of that is
// so. What this user may not read is not reported: the run will say.
func (c *cluster) queueProblem(ctx context.Context, s *plan.Step, ns string) (string, error) {
	if s.Priority != "" {
		_, err := c.Client.SchedulingV1().PriorityClasses().Get(ctx, s.Priority, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("it asks for the PriorityClass %s (sdk.Priority), which the cluster does not have, so the API server would refuse its pods: create it, or name one the cluster has", s.Priority), nil
		case err != nil && !apierrors.IsForbidden(err):
			return "", fmt.Errorf("PriorityClass %s of step %s: %w", s.Priority, s.Name, err)
		}
	}
	if s.Queue == "" {
		return "", nil
	}
	served, err := c.kueueServed()
	if err != nil {
		return "", err
	}
	if !served {
		return fmt.Sprintf("it waits in the Kueue LocalQueue %s (sdk.Queue), but the cluster does not serve Kueue's API (%s), so nothing would ever admit it: install Kueue, or run it without a queue (sdk.Queue, `queue` in manifold.toml)", s.Queue, workloadGVR.GroupVersion()), nil
	}
	lq, err := c.Dynamic.Resource(localQueueGVR).Namespace(ns).Get(ctx, s.Queue, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("it waits in the Kueue LocalQueue %s (sdk.Queue), which namespace %s does not have, so nothing would ever admit it: create that LocalQueue there, or name one the namespace has (sdk.Queue, `queue` in manifold.toml)", s.Queue, ns), nil
	case apierrors.IsForbidden(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("LocalQueue %s of step %s: %w", s.Queue, s.Name, err)
	}
	if why, err := c.clusterQueueProblem(ctx, lq); why != "" || err != nil {
		return why, err
	}
	if s.Priority != "" {
		_, err := c.Dynamic.Resource(workloadPriorityClassGVR).Get(ctx, s.Priority, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("it asks for the priority %s (sdk.Priority) in a Kueue queue, and the cluster has no WorkloadPriorityClass %s, so Kueue would not take its workload: create one of that name beside the PriorityClass", s.Priority, s.Priority), nil
		case err != nil && !apierrors.IsForbidden(err):
			return "", fmt.Errorf("WorkloadPriorityClass %s of step %s: %w", s.Priority, s.Name, err)
		}
	}
	return "", nil
}

// clusterQueueProblem says why the ClusterQueue of LocalQueue lq admits nothing:
// it does not exist, or it is not active (with Kueue's reason); "" when it is
// active or this user may not read it.
func (c *cluster) clusterQueueProblem(ctx context.Context, lq *unstructured.Unstructured) (string, error) {
	name, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
	cq, err := c.Dynamic.Resource(clusterQueueGVR).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Sprintf("its Kueue LocalQueue %s submits to the ClusterQueue %s, which does not exist, so nothing would ever admit it: ask the cluster's admins to create it, or use another queue", lq.GetName(), name), nil
	case apierrors.IsForbidden(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("ClusterQueue %s: %w", name, err)
	}
	if active := condition(cq, "Active"); active == nil || active.Status != metav1.ConditionTrue {
		why := "it has no Active condition yet"
		if active != nil {
			why = active.Reason + ": " + active.Message
		}
		return fmt.Sprintf("its Kueue LocalQueue %s submits to the ClusterQueue %s, which is not active (%s), so it admits nothing: ask the cluster's admins to fix it, or use another queue", lq.GetName(), name, why), nil
	}
	return "", nil
}

// condition returns obj's status condition typ, or nil.
func condition(obj *unstructured.Unstructured, typ string) *metav1.Condition {
	var status struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if st, ok := obj.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &status)
	}
	return meta.FindStatusCondition(status.Conditions, typ)
}

// queuesReady adds to r, for every step with a queue or a priority, why it would
// never be admitted or would be refused (queueProblem).
func (c *cluster) queuesReady(ctx context.Context, f *plan.Flow, r *placement.Report) error {
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.Queue == "" && s.Priority == "" {
			continue
		}
		ns := s.Namespace
		if ns == "" {
			ns = c.Namespace
		}
		why, err := c.queueProblem(ctx, s, ns)
		if err != nil {
			return err
		}
		if why != "" {
			r.Refuse(i, why)
		}
	}
	return nil
}

// queuesExist refuses a run, before anything is created, in which a step would
// never be admitted by Kueue or would be refused (queueProblem).
func (c *cluster) queuesExist(ctx context.Context, units []*unit) error {
	seen := map[string]bool{}
	for _, u := range units {
		s := u.Step
		if s.Queue == "" && s.Priority == "" || seen[u.ns+"/"+s.Name] {
			continue
		}
		seen[u.ns+"/"+s.Name] = true
		why, err := c.queueProblem(ctx, s, u.ns)
		if err != nil {
			return err
		}
		if why != "" {
			return fmt.Errorf("step %s cannot run on the cluster at %s: %s", s.Name, c.Host, why)
		}
	}
	return nil
}

// queued says why a unit's Job or JobSet (uid), suspended for Kueue, waits, from
// the watcher's cache of the namespace's Workloads: the reason its Workload gives
// (quota, an inactive ClusterQueue, admission checks), with said set; or, while
// Kueue has said nothing yet, a guess at why, with said unset.
func (w *watcher) queued(ns string, uid types.UID, queue string) (why string, said bool) {
	waiting := "waiting for Kueue to admit it (LocalQueue " + queue + ")"
	nw := w.ns[ns]
	if nw.workloads == nil {
		return waiting, false
	}
	objs, _ := nw.workloads.GetIndexer().ByIndex(ownerIndex, string(uid))
	if len(objs) == 0 {
		return "Kueue has made no Workload of it (LocalQueue " + queue + "): is Kueue managing namespace " + ns + "?", false
	}
	wl, _ := objs[0].(*unstructured.Unstructured)
	if wl == nil {
		return waiting, false
	}
	if q := condition(wl, "QuotaReserved"); q != nil && q.Status != metav1.ConditionTrue && q.Message != "" {
		return "waiting for quota in LocalQueue " + queue + ": " + q.Message, true
	}
	if a := condition(wl, "Admitted"); a != nil && a.Status != metav1.ConditionTrue && a.Message != "" {
		return "quota reserved, waiting for admission: " + a.Message, true
	}
	return waiting, false
}

// ownerIndex indexes the cached Workloads by the uids of their owners.
const ownerIndex = "owner"

func ownerUIDs(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, o := range u.GetOwnerReferences() {
		out = append(out, string(o.UID))
	}
	return out, nil
}
