package kube

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/plan"
)

// foreground deletes an object after what it owns (a Job's pods, a JobSet's
// Jobs), so that once it is gone nothing of it is left.
var foreground = metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}

// deleteUnit deletes unit u's objects, last (the Job or JobSet) first.
func (r *runner) deleteUnit(ctx context.Context, u *unit) error {
	for _, o := range slices.Backward(u.objects) {
		err := r.c.retry(ctx, func(ctx context.Context) error {
			return r.c.dynamic.Resource(o.gvr).Namespace(u.ns).Delete(ctx, o.u.GetName(), foreground)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", o.u.GetKind(), o.u.GetName(), err)
		}
	}
	return nil
}

// cleanup deletes everything of the kinds it creates labelled with the run
// (foreground), and waits until
// the caches hold none of it, for at most CleanupTimeout or until Options.Force
// ends. It returns what was left.
func (r *runner) cleanup(ctx context.Context) []string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.CleanupTimeout)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + r.ID}
	// What the run creates: a JobSet's Jobs, pods and Service, and a Job's
	// pods, go with it (foreground).
	for ns := range r.w.ns {
		for _, gvr := range createdKinds(r.units) {
			err := r.c.retry(ctx, func(ctx context.Context) error {
				return r.c.dynamic.Resource(gvr).Namespace(ns).DeleteCollection(ctx, foreground, sel)
			})
			if err != nil && !apierrors.IsNotFound(err) {
				r.Disp.Note("deleting the run's %s in %s: %v", gvr.Resource, ns, err)
			}
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
