package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
)

// Check compares every step of f with the nodes of the cluster o names, before
// anything is submitted: which nodes pass the step's node selector and tolerations
// and advertise enough allocatable of each resource it asks for. A step no node
// (or, for a multi-node step, too few nodes) can take would stay Pending for ever,
// and is reported with the reason. The EFA interfaces the nodes a step targets
// advertise must be the same on all of them; a mixed or partial rollout fails
// closed. The error is for a cluster that cannot be reached or does not let this
// user list its nodes.
//
// It notes what RBAC would refuse a run (Needs), as run's preflight would:
// what the run cannot do without, and what it would do without.
//
// Then, as run does, it dry-runs on the cluster (dryRun=All) every object a run
// of f as o.As in o's namespace would create, and each step's pod: a step that
// admission refuses (Pod Security, a LimitRange, a ResourceQuota, a webhook) is
// reported with the refusal, which names the field and what refused it.
func Check(ctx context.Context, f *plan.Flow, o Options) (*placement.Report, error) {
	var err error
	if o.As, err = kindAs(o.As); err != nil {
		return nil, err
	}
	c, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	report, err := c.check(ctx, f)
	if err != nil {
		return nil, err
	}
	if o.As == AsJobSet {
		if err := c.Served(jobSetGVR, "install the JobSet controller, or check with --as job"); err != nil {
			return nil, err
		}
	}
	rp, _ := placement.Resolve(f, report)
	rp.Run, rp.Schedule = runid.New(time.Now()), ""
	units, errs := plan2units(rp, o.As, c.Namespace)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	// What RBAC would refuse run --kube (its preflight), as notes.
	denied, err := c.refusedNeeds(ctx, unitNamespaces(units), needs(shapeOf(f, units, false)))
	if err != nil {
		return nil, err
	}
	for _, d := range denied {
		if d.need.Without != "" {
			report.Notes = append(report.Notes, d.note())
		} else {
			report.Notes = append(report.Notes, "run --kube would be refused: this user may not "+d.line())
		}
	}
	refusals, notes, err := c.dryRun(ctx, units)
	if err != nil {
		return nil, err
	}
	for _, n := range notes {
		if !slices.Contains(report.Notes, n) {
			report.Notes = append(report.Notes, n)
		}
	}
	for _, r := range refusals {
		if i := slices.IndexFunc(rp.Steps, func(s plan.Step) bool { return s.Name == r.Step }); i >= 0 {
			report.Refuse(i, r.Reason())
		}
	}
	return report, nil
}

// errNodesForbidden is what check returns, wrapped, when RBAC refuses to list
// nodes.
var errNodesForbidden = errors.New("nodes forbidden")

// check lists the cluster's nodes (and, for a flow with DRA steps, what its DRA
// drivers publish), has placement plan f on them, and refuses the steps whose
// installed claim templates or queues the cluster lacks.
func (c *cluster) check(ctx context.Context, f *plan.Flow) (*placement.Report, error) {
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("%w: "+"RBAC on the cluster at %s (context %s) does not let this user list nodes, which checking where steps can run needs: ask a cluster admin for a ClusterRole granting list on nodes", errNodesForbidden, c.Host, c.Context)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the nodes of the cluster at %s: %w", c.Host, err)
	}
	var inv *placement.Inventory
	if placement.NeedsDevices(f) {
		if inv, err = c.inventory(ctx); err != nil {
			return nil, err
		}
	}
	r := placement.Plan(f, list.Items, inv, c.Host, c.Context)
	if err := c.installedClaims(ctx, f, r); err != nil {
		return nil, err
	}
	if err := c.queuesReady(ctx, f, r); err != nil {
		return nil, err
	}
	return r, nil
}
