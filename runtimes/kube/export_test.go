package kube

import (
	"context"
	"time"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
)

// DryRun makes the dry run a run of f with o (as Jobs) would make before it
// creates anything, and returns the refusals and notes, and how many requests it
// sent.
func DryRun(ctx context.Context, f *plan.Flow, o Options) ([]Refusal, []string, int, error) {
	c, err := connect(ctx, o)
	if err != nil {
		return nil, nil, 0, err
	}
	rp := *f
	rp.Run = runid.New(time.Now())
	units, errs := plan2units(&rp, AsJob, c.Namespace)
	if len(errs) > 0 {
		return nil, nil, 0, errs.ToAggregate()
	}
	asks, err := dryRunAsks(units, nil)
	if err != nil {
		return nil, nil, 0, err
	}
	refusals, notes, err := c.dryRun(ctx, units)
	return refusals, notes, len(asks), err
}

// Preflight makes the checks of RBAC a run of f with o makes before it creates
// anything, and returns the notes on what the run would do without.
func Preflight(ctx context.Context, f *plan.Flow, o Options) ([]string, error) {
	as, err := kindAs(o.As)
	if err != nil {
		return nil, err
	}
	c, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	rp := *f
	rp.Run = runid.New(time.Now())
	units, errs := plan2units(&rp, as, c.Namespace)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return c.preflight(ctx, unitNamespaces(units), as, needs(shapeOf(f, units, o.NoCheck)))
}

// CleanupSelectors returns the label selectors by step with which a run of f
// (as Jobs, in namespace) deletes its Jobs n requests at once, step names of at
// most maxBytes a request (stepSelectors), and each Job's labels; the run's
// selector is runSelector's.
func CleanupSelectors(f *plan.Flow, namespace string, n, maxBytes int) ([]string, []map[string]string, error) {
	rp := *f
	rp.Run, rp.RunUID = runid.New(time.Now()), "uid-1"
	units, errs := plan2units(&rp, AsJob, namespace)
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	var jobs []map[string]string
	for _, u := range units {
		jobs = append(jobs, u.objects[len(u.objects)-1].u.GetLabels())
	}
	return stepSelectors(runSelector(rp.Name, rp.Run, rp.RunUID), units, namespace, n, maxBytes), jobs, nil
}
