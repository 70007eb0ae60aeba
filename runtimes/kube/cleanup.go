package kube

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/plan"
)

// foreground deletes an object after what it owns (a Job's pods, a JobSet's
// Jobs), so that once it is gone nothing of it is left.
var foreground = metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}

// background deletes an object at once, and what it owns after it, by the
// garbage collector.
var background = metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}

// deleteUnit deletes unit u's objects, last (the Job or JobSet) first.
func (r *runner) deleteUnit(ctx context.Context, u *unit) error {
	for _, o := range slices.Backward(u.objects) {
		err := r.c.Retry(ctx, func(ctx context.Context) error {
			return r.c.Dynamic.Resource(o.gvr).Namespace(u.ns).Delete(ctx, o.u.GetName(), foreground)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", o.u.GetKind(), o.u.GetName(), err)
		}
	}
	return nil
}

// cleanup deletes everything of the kinds it creates labelled as the run's own
// (its flow, ID and UID: runSelector),
// and waits until the caches hold none of it (the pods included), for at most
// CleanupTimeout or until Options.Force ends. It returns what was left.
//
// A JobSet's Jobs, pods and Service, and a Job's pods, go with it, and the
// run's pods are then deleted by one request of their own. Jobs and
// JobSets still running go foreground: each stays, and makes no more pods,
// until what it owns is gone. The Jobs of a run that succeeded have all ended
// and make no more pods: they go at once (background), their pods after them,
// which spares the garbage collector a write to each Job (and the API server
// one). A JobSet goes foreground always: its Jobs are not watched, so only
// the JobSet's staying shows that they are not gone yet.
//
// The API server deletes the objects of one deletecollection one after
// another, so the run's Jobs or JobSets go in up to cleanupWorkers requests at
// once, each for a share of its steps (stepSelectors); then one request per
// kind takes whatever of the run is left.
func (r *runner) cleanup(ctx context.Context, succeeded bool) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.CleanupTimeout)
	defer cancel()
	sel := r.selector()
	for ns := range r.w.ns {
		for _, gvr := range createdKinds(r.units) {
			opts := foreground
			if succeeded && gvr == jobGVR || gvr == configMapGVR {
				// A ConfigMap owns nothing: foreground would only wait for
				// the garbage collector to take its finalizer off.
				opts = background
			}
			if gvr == jobGVR || gvr == jobSetGVR {
				r.deleteCollections(ctx, gvr, ns, opts, stepSelectors(sel, r.units, ns, cleanupWorkers, maxSelectorBytes))
			}
			r.deleteCollections(ctx, gvr, ns, opts, []string{sel})
		}
		// The pods, once their Jobs (or JobSets) are going and make no
		// more: one request deletes them all, where the garbage collector
		// would take one a request (10,000 pods, 8 minutes at its stock
		// limit). A user who may not (podCleanup) was told at the start.
		err := r.c.Retry(ctx, func(ctx context.Context) error { return r.deletePods(ctx, ns, sel) })
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			r.Disp.Note("deleting the run's pods in %s: %v", ns, err)
		}
	}
	// Each deletion the caches see is a change: the count, not a list of what
	// is left, is what is looked at for each.
	for !r.w.empty() {
		select {
		case <-r.w.changed:
		case <-ctx.Done():
			return r.w.left()
		case <-r.o.Force.Done():
			return r.w.left()
		}
	}
	return nil
}

// deletePods deletes the pods in namespace ns that sel picks, in one
// deletecollection. The API server answers with every pod it deleted, whole (10,000
// pods are some 80 MB): the answer is read and dropped as it comes, not held.
func (r *runner) deletePods(ctx context.Context, ns, sel string) error {
	body, err := r.c.Client.RESTClient().Delete().Namespace(ns).Resource("pods").
		Param("labelSelector", sel).Body(&background).Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(io.Discard, body)
	return err
}

// Bounds of the cleanup's requests: how many deletecollections of one kind are
// in flight at once, and how many bytes of step names one request's label
// selector may hold, which keeps its URL within what proxies in front of an
// API server accept.
const (
	cleanupWorkers   = 4
	maxSelectorBytes = 4 << 10
)

// deleteCollections deletes, with opts, in namespace ns the objects of
// resource gvr that each of selectors picks, up to cleanupWorkers requests at
// once. What it could not delete is noted; the wait that follows names what is
// left.
func (r *runner) deleteCollections(ctx context.Context, gvr schema.GroupVersionResource, ns string, opts metav1.DeleteOptions, selectors []string) {
	inParallel(len(selectors), cleanupWorkers, func(i int) {
		err := r.c.Retry(ctx, func(ctx context.Context) error {
			return r.c.Dynamic.Resource(gvr).Namespace(ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: selectors[i]})
		})
		if err != nil && !apierrors.IsNotFound(err) {
			r.Disp.Note("deleting the run's %s in %s: %v", gvr.Resource, ns, err)
		}
	})
}

// stepSelectors splits the steps of units in namespace ns into label
// selectors, run (the run's selector) and `step in (…)`, in run order: at most
// n of about as many units each, unless a selector's step names would pass
// maxBytes, which makes more. It returns none when one selector would do:
// a run of one step (whose foreach items are one step's), or of fewer units
// than twice n.
func stepSelectors(run string, units []*unit, ns string, n, maxBytes int) []string {
	var steps []string
	count := map[string]int{}
	total := 0
	for _, u := range units {
		if u.ns != ns {
			continue
		}
		if count[u.Step.Name] == 0 {
			steps = append(steps, u.Step.Name)
		}
		count[u.Step.Name]++
		total++
	}
	if len(steps) < 2 || total < 2*n {
		return nil
	}
	share := (total + n - 1) / n
	var out []string
	var group []string
	inGroup, size := 0, 0
	flush := func() {
		if len(group) > 0 {
			out = append(out, run+","+plan.LabelStep+" in ("+strings.Join(group, ",")+")")
		}
		group, inGroup, size = nil, 0, 0
	}
	for _, s := range steps {
		if len(group) > 0 && size+len(s)+1 > maxBytes {
			flush()
		}
		group = append(group, s)
		inGroup += count[s]
		size += len(s) + 1
		if inGroup >= share {
			flush()
		}
	}
	flush()
	return out
}
