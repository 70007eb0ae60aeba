package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/plan"
	rcluster "github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// adopt matches what the cluster already holds of a resumed run (a run kept with
// Keep, or whose runner died), the run's own objects (the watcher's): a unit
// whose Job or JobSet succeeded is not run again, one that failed, or whose
// step is to run again because it changed (dag.Run.Rerun), is deleted to run
// again, and one still running is watched where it is.
func (r *runner) adopt(ctx context.Context, resumed bool) error {
	if !resumed {
		return nil
	}
	var stale []*unit
	done := map[*fanOut]bool{}
	for _, u := range r.units {
		if fo := u.fan; fo != nil {
			if !done[fo] {
				done[fo] = true
				old, err := r.adoptFanOut(fo)
				if err != nil {
					return err
				}
				stale = append(stale, old...)
			}
			continue
		}
		ob := r.observe(u)
		switch {
		case !ob.exists:
		case r.Rerun[u.Step.Name]:
			stale = append(stale, u)
		case ob.succeeded:
			u.Earlier, u.created, u.seen = true, true, true
			if r.Task(u.Unit).State != record.Succeeded {
				r.Update(u.Unit, func(t *record.Task) { adopted(t, ob, time.Now()) })
			}
		case ob.failed || u.Earlier:
			stale = append(stale, u)
		default:
			u.created, u.seen = true, true
			r.Update(u.Unit, func(t *record.Task) { adopted(t, ob, time.Now()) })
		}
	}
	return r.deleteStale(ctx, stale)
}

// deleteStale deletes the objects of stale, units of a resumed run that must
// go before it goes on (failed, or of steps changed since), and waits until
// the caches hold none of them, for at most CleanupTimeout.
func (r *runner) deleteStale(ctx context.Context, stale []*unit) error {
	if len(stale) == 0 {
		return nil
	}
	for _, u := range stale {
		if err := r.deleteUnit(ctx, u); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, r.o.CleanupTimeout)
	defer cancel()
	for {
		left := 0
		for _, u := range stale {
			if r.observe(u).exists {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-r.w.changed:
		case <-ctx.Done():
			return fmt.Errorf("resuming run %s: the objects of its last attempt that must go (failed, or of steps changed since) are still being deleted; try again shortly", r.ID)
		}
	}
}

// adopted records in t what the cluster shows, ob, of a unit that an earlier
// runner created and this one takes over: running, or succeeded (at now when
// only its pods say so yet); the attempt it is at; and its start, when its Job
// or JobSet was made, which the earlier runner's record of it (rewritten as
// pending when the run resumed) no longer holds.
func adopted(t *record.Task, ob observed, now time.Time) {
	t.State, t.Attempts, t.Error, t.Reason = record.Running, ob.attempt, "", ""
	if t.Start.IsZero() {
		t.Start = ob.created.UTC()
	}
	t.Node, t.Pods = strings.Join(ob.nodes, ","), podNames(ob)
	if !ob.succeeded {
		return
	}
	t.State, t.End, t.ExitCode = record.Succeeded, now.UTC(), new(0)
	if !ob.ended.IsZero() {
		t.End = ob.ended.UTC()
	}
	if t.End.Before(t.Start) {
		t.End = t.Start
	}
}

// loop creates units as the steps they wait for succeed and follows them until
// every unit has ended or ctx ends the run. It reports whether ctx did. Each
// turn looks only at the units a change concerned (watcher.take), so that a
// change costs the same however many steps the run has.
func (r *runner) loop(ctx context.Context) bool {
	for {
		if err := r.c.GivenUp(); err != nil {
			r.lost(err)
			return false
		}
		if outages := r.c.TakeOutages(); len(outages) > 0 {
			r.recover(ctx, outages)
		}
		// While the API server is lost the caches stand still: what they
		// hold was true, but nothing is decided by how long it has lasted.
		if _, down := r.c.Down(); !down {
			r.evaluate(ctx, r.touched())
			r.release(ctx)
		}
		if r.Unfinished() == 0 {
			return false
		}
		select {
		case <-r.w.changed:
		case <-ctx.Done():
			return true
		}
	}
}

// recover carries the run on after the API server came back from outages: the
// informers list anew (theirs back off for up to a minute before they try
// again), and the time a unit has waited to start or to be admitted does not
// count the outages, so that the pending grace and timeout do not end during one.
func (r *runner) recover(ctx context.Context, outages []time.Duration) {
	var d time.Duration
	for _, o := range outages {
		d += o
	}
	if err := r.w.relist(ctx); err != nil && ctx.Err() == nil {
		// The running informers try again on their own.
		r.Disp.Note("listing the run's objects again after the outage: %v", err)
	}
	r.skip(d, time.Now())
}

// skip moves the clocks of the units waiting to start or to be admitted on by d,
// at now, and sets their timers again for what is left of their grace and
// timeout.
func (r *runner) skip(d time.Duration, now time.Time) {
	for _, u := range r.units {
		switch {
		case r.Final(u.Unit):
		case !u.stuckSince.IsZero():
			u.stuckSince = u.stuckSince.Add(d)
			r.stopTimers(u)
			waited := now.Sub(u.stuckSince)
			if !u.reported {
				r.after(u, r.o.PendingGrace-waited)
			}
			if r.o.PendingTimeout > 0 && !u.imageStuck {
				r.after(u, r.o.PendingTimeout-waited)
			}
		case !u.queuedSince.IsZero() && r.Task(u.Unit).State == record.Queued:
			u.queuedSince = u.queuedSince.Add(d)
			r.stopTimers(u)
			if u.queuedFor == "" {
				r.after(u, r.o.PendingGrace-now.Sub(u.queuedSince))
			}
		}
	}
}

// lost ends a run that gave up on an outage: every unit created and not ended
// fails with err, which says the objects may still run and how to resume; none
// is started. Nothing can be deleted: the objects are left where they are.
func (r *runner) lost(err error) {
	for _, u := range r.units {
		if u.created && !r.Final(u.Unit) {
			r.fail(u, err.Error(), "Unreachable", nil)
		}
	}
}

// touched returns the units changed since the last look, in run order: every
// unit when a change could not be tied to one.
func (r *runner) touched() []*unit {
	all, keys := r.w.take()
	if all {
		for _, fo := range r.fanOuts {
			fo.changes(r.w)
		}
		return r.units
	}
	var us []*unit
	seen := map[*unit]bool{}
	for k := range keys {
		if u, ok := r.byKey[k]; ok && !seen[u] {
			seen[u] = true
			us = append(us, u)
		}
		if fo, ok := r.fanOuts[k]; ok {
			for _, u := range fo.changes(r.w) {
				if !seen[u] {
					seen[u] = true
					us = append(us, u)
				}
			}
		}
	}
	slices.SortFunc(us, func(a, b *unit) int { return a.pos - b.pos })
	return us
}

// release creates the units the run may start now (dag.Run.Release) that are
// not created yet: a unit adopted from an earlier runner is watched where it is.
// Up to createWorkers units are created at once, so that a fan-out is created
// at the client's rate limit (--qps, --burst) rather than one request's
// latency at a time; what each create brought is then taken in run order.
func (r *runner) release(ctx context.Context) {
	var us []*unit
	for _, du := range r.Release() {
		u := r.byUnit[du]
		if u.created {
			continue
		}
		u.created = true
		if u.fan != nil {
			// The items of a fan-out start together, their objects made once.
			r.Start(u.Unit)
			if u.fan.created {
				continue
			}
			u.fan.created = true
		}
		us = append(us, u)
	}
	refused := make([]error, len(us))
	inParallel(len(us), createWorkers, func(i int) { refused[i] = r.create(ctx, us[i]) })
	for i, u := range us {
		switch {
		case refused[i] == nil && u.fan != nil:
			r.Disp.Event(u.Step.Name, false, "%s %s created, for %s", u.kind, u.name, display.Count(len(u.fan.units), "item"))
		case refused[i] == nil:
			r.Disp.Event(u.Label, false, "%s %s created", u.kind, u.name)
		case ctx.Err() != nil || r.c.GivenUp() != nil:
			// The loop ends the run.
		default:
			for _, v := range r.sharing(u) {
				r.fail(v, refused[i].Error(), "Refused", nil)
			}
		}
	}
}

// sharing returns the units that share unit u's objects: u, or every item
// of u's fan-out not ended.
func (r *runner) sharing(u *unit) []*unit {
	if u.fan == nil {
		return []*unit{u}
	}
	var out []*unit
	for _, v := range u.fan.units {
		if !r.Final(v.Unit) {
			out = append(out, v)
		}
	}
	return out
}

// createWorkers bounds how many units release creates at once. The client's
// rate limit paces their requests all the same.
const createWorkers = 16

// create starts unit u and creates its objects in order. It returns what the
// cluster refused, or why the request got no answer: nil once every object
// exists.
func (r *runner) create(ctx context.Context, u *unit) error {
	index := u.Index
	if u.fan == nil {
		r.Start(u.Unit)
	} else {
		index = -1 // the items' pods share one spec
	}
	if tp := r.Trace.UnitParent(u.Step, index); tp != "" {
		setEnv(u.objects[len(u.objects)-1].u, plan.EnvTraceParent, tp)
	}
	for _, o := range u.objects {
		// A create made again after one that got no answer may find the object
		// made by the first: it is the run's own when it carries the run's
		// labels (existing).
		err := r.c.Retry(ctx, func(ctx context.Context) error {
			_, err := r.c.Dynamic.Resource(o.gvr).Namespace(u.ns).Create(ctx, o.u, metav1.CreateOptions{FieldValidation: "Strict"})
			return err
		})
		switch {
		case apierrors.IsAlreadyExists(err):
			if err := r.existing(ctx, u, o); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("the cluster refused its %s %s: %w", o.u.GetKind(), o.u.GetName(), err)
		}
	}
	return nil
}

// evaluate brings the state of units (those created) up to date with the
// caches: each is looked at once (look), and what was seen acted on.
func (r *runner) evaluate(ctx context.Context, units []*unit) {
	now := time.Now()
	for _, u := range units {
		if !u.created || r.Final(u.Unit) {
			continue
		}
		ob := r.look(u)
		r.act(ctx, u, ob, now)
		if r.Final(u.Unit) {
			// Nothing looks at its pods again: what it remembered of them
			// goes, as a fan-out of 10,000 items would keep 10,000 pods.
			u.last = nil
		}
	}
}

// act brings unit u up to what the caches show of it, ob, at now: gone,
// succeeded, failed, waiting for Kueue, or running (or waiting to).
func (r *runner) act(ctx context.Context, u *unit, ob observed, now time.Time) {
	if !ob.exists {
		if u.seen {
			r.fail(u, fmt.Sprintf("its %s %s was deleted from the cluster", u.kind, u.name), "Deleted", nil)
		}
		return
	}
	u.seen = true
	if !ob.running.IsZero() {
		r.Running(u.Unit, ob.running)
	}
	r.logs.follow(ctx, u, ob.pods)
	switch {
	case ob.succeeded:
		r.stopTimers(u)
		r.setView(u, ob)
		r.Succeed(u.Unit, func(t *record.Task) {
			t.Attempts, t.ExitCode = ob.attempt, new(0)
			t.Node, t.Pods = strings.Join(ob.nodes, ","), podNames(ob)
		})
	case ob.failed:
		r.stopTimers(u)
		msg, reason, code := r.failure(ctx, u, ob)
		r.Update(u.Unit, func(t *record.Task) { t.Attempts = ob.attempt; t.Pods = podNames(ob) })
		r.fail(u, msg, reason, code)
	case ob.queued != "":
		r.queue(u, ob, now)
	default:
		r.runs(u, ob, now)
	}
}

// failure says why unit u's Job or JobSet failed, ob: its reason and
// message, after what its last failed pod says (cluster.PodFailure) with
// that pod's last log lines. It returns the message, the short reason and
// the exit code when one is known.
func (r *runner) failure(ctx context.Context, u *unit, ob observed) (string, string, *int) {
	msg, reason, code := ob.reason, ob.reason, (*int)(nil)
	if ob.message != "" {
		msg += ": " + ob.message
	}
	p := ob.lastFailed
	if p == nil {
		return msg, reason, code
	}
	var pm string
	pm, reason, code = rcluster.PodFailure(p, u.Step)
	msg = pm + "; " + u.kind + " " + msg
	if ob.reason == batchv1.JobReasonDeadlineExceeded {
		// The step's Timeout ended it: its pod was killed (and may be
		// remembered as last seen), which is not the cause.
		reason = ob.reason
	}
	if tail := r.logs.tail(ctx, p); tail != "" {
		msg += "\n" + tail
	}
	return msg, reason, code
}

// runs follows unit u, whose Job or JobSet runs (or waits for its pods to),
// ob, at now: admitted by Kueue when it waited, its view, an attempt its Job
// controller retried since the last look (dag.Run.Retried), and pods that
// cannot start (pending).
func (r *runner) runs(u *unit, ob observed, now time.Time) {
	if r.Task(u.Unit).State == record.Queued {
		u.queuedFor = ""
		r.Update(u.Unit, func(t *record.Task) { t.State, t.Reason = record.Running, "" })
		r.Disp.Event(u.Label, false, "admitted by Kueue")
	}
	r.setView(u, ob)
	if n := r.Task(u.Unit).Attempts; ob.attempt > n {
		why := "a pod failed"
		if ob.lastFailed != nil {
			why, _, _ = rcluster.PodFailure(ob.lastFailed, u.Step)
		}
		r.Retried(u.Unit, n, why, ob.attempt)
	}
	r.pending(u, ob, now)
}

// queue follows a unit whose Job or JobSet waits, suspended, for Kueue to admit
// it: it is shown queued, and Kueue's reason is told when it gives one and again
// when that changes; while Kueue says nothing, why it may wait is told once after
// the pending grace. The pending timeout does not run while it waits: it counts
// from its admission, when its pods are made.
func (r *runner) queue(u *unit, ob observed, now time.Time) {
	r.unstick(u)
	if r.Task(u.Unit).State != record.Queued {
		u.queuedSince, u.queuedFor = now, ""
		r.Update(u.Unit, func(t *record.Task) { t.State, t.Reason = record.Queued, "Queued" })
		r.after(u, r.o.PendingGrace)
	}
	switch {
	case ob.queued == u.queuedFor:
	case ob.kueueSaid, u.queuedFor == "" && now.Sub(u.queuedSince) >= r.o.PendingGrace:
		u.queuedFor = ob.queued
		r.Disp.Event(u.Label, false, "queued: %s", ob.queued)
	}
}

// unstick forgets that unit u's pods could not start, and its timers for that.
func (r *runner) unstick(u *unit) {
	if !u.stuckSince.IsZero() {
		r.stopTimers(u)
		u.stuckSince, u.reported, u.imageStuck = time.Time{}, false, false
	}
}

// pending follows a unit whose pods cannot start: the reason is reported once
// after the grace period (at once for an image that cannot be pulled); a pod that
// cannot get its image fails the step after the grace period, and one that cannot
// be scheduled after PendingTimeout, when set.
func (r *runner) pending(u *unit, ob observed, now time.Time) {
	stuck, image := ob.stuck, ob.imageStuck
	noPods := stuck == "" && len(ob.pods) == 0 && !ob.waiting
	if noPods {
		stuck = fmt.Sprintf("its %s %s has made no pods", u.kind, u.name)
	}
	if stuck == "" {
		r.unstick(u)
		return
	}
	if u.stuckSince.IsZero() || image != u.imageStuck {
		r.stopTimers(u)
		u.stuckSince, u.reported, u.imageStuck = now, false, image
		r.after(u, r.o.PendingGrace)
		if r.o.PendingTimeout > 0 && !image {
			r.after(u, r.o.PendingTimeout)
		}
	}
	waited := now.Sub(u.stuckSince)
	report := !u.reported && (image || waited >= r.o.PendingGrace)
	timedOut := image && waited >= r.o.PendingGrace || !image && r.o.PendingTimeout > 0 && waited >= r.o.PendingTimeout
	if !report && !timedOut {
		return
	}
	// Why a Job or JobSet makes no pods is in its events: asked only when it is
	// reported, not at every change the informers see.
	if noPods {
		if msg := r.warning(u); msg != "" {
			stuck += ": " + msg
		} else if u.kind == "JobSet" {
			stuck += "; is the JobSet controller running?"
		}
	}
	if report {
		u.reported = true
		r.Update(u.Unit, func(t *record.Task) { t.Reason = reasonOf(stuck) })
		if image {
			r.Disp.Event(u.Label, true, "%s", stuck)
		} else {
			r.Disp.Event(u.Label, true, "waiting %s: %s", display.Human(waited.Round(time.Second)), stuck)
		}
	}
	switch {
	case !timedOut:
	case image:
		r.abandon(u, fmt.Sprintf("%s (for %s)", stuck, display.Human(waited.Round(time.Second))), reasonOf(stuck))
	default:
		r.abandon(u, fmt.Sprintf("still pending after --pending-timeout %s: %s", r.o.PendingTimeout, stuck), "Unschedulable")
	}
}

// reasonOf picks the short reason out of a stuck message.
func reasonOf(stuck string) string {
	for _, w := range waitingReasons {
		if strings.Contains(stuck, ": "+w+":") {
			return w
		}
	}
	if strings.Contains(stuck, "cannot be scheduled") {
		return "Unschedulable"
	}
	return "Pending"
}

// abandon fails a unit that cannot start and deletes its objects, so that its pods
// do not start later by surprise; the run waits for them to be gone before it
// ends.
func (r *runner) abandon(u *unit, msg, reason string) {
	for _, v := range r.sharing(u) {
		r.fail(v, msg, reason, nil)
	}
	if u.fan != nil {
		u = u.fan.units[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.deleteUnit(ctx, u); err != nil {
		r.Disp.Note("deleting the objects of %s: %v", u.Label, err)
		return
	}
	r.abandoned = append(r.abandoned, u)
}

// awaitAbandoned waits, for at most CleanupTimeout, until the objects of the
// units abandoned are gone.
func (r *runner) awaitAbandoned(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.o.CleanupTimeout)
	defer cancel()
	for {
		var left []string
		for _, u := range r.abandoned {
			if r.observe(u).exists {
				left = append(left, u.kind+" "+u.name)
			}
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-r.w.changed:
		case <-ctx.Done():
			r.Disp.Note("still being deleted: %s", strings.Join(left, ", "))
			return
		case <-r.o.Force.Done():
			return
		}
	}
}

// warning returns the latest warning event about unit u's Job or JobSet, which
// says why it makes no pods (a quota, an admission webhook), or "".
func (r *runner) warning(u *unit) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := r.c.Client.CoreV1().Events(u.ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + u.name + ",type=Warning",
	})
	if err != nil || len(list.Items) == 0 {
		return ""
	}
	last := list.Items[len(list.Items)-1]
	return last.Reason + ": " + last.Message
}

// after wakes the loop after d.
func (r *runner) after(u *unit, d time.Duration) {
	key := u.key()
	u.timers = append(u.timers, time.AfterFunc(d, func() { r.w.touch(key) }))
}

func (r *runner) stopTimers(u *unit) {
	for _, t := range u.timers {
		t.Stop()
	}
	u.timers = nil
}

// fail records that unit u failed, and stops its timers.
func (r *runner) fail(u *unit, msg, reason string, code *int) {
	r.stopTimers(u)
	r.Fail(u.Unit, msg, reason, code)
}

func podNames(ob observed) []string {
	var names []string
	for _, p := range ob.pods {
		names = append(names, p.Name)
	}
	return names
}

// setView records what the live view shows of u.
func (r *runner) setView(u *unit, ob observed) {
	r.Locked(func() { u.ready, u.nodes = ob.ready, ob.nodes })
	if len(ob.nodes) > 0 {
		r.Amend(u.Unit, func(t *record.Task) { t.Node = strings.Join(ob.nodes, ",") })
	}
}

// view is the live view: one row per unit, with its pods ready and nodes.
func (r *runner) view(now time.Time) (string, []string, [][]string) {
	return r.UnitView(now, []string{"PODS", "NODE"}, func(du *dag.Unit, t record.Task) []string {
		u := r.byUnit[du]
		pods := ""
		if u.created && !t.State.Final() {
			pods = fmt.Sprintf("%d/%d", u.ready, u.pods)
		}
		return []string{pods, nodeSummary(u.nodes)}
	})
}

// finish records how the run ended, cleans up, and reports.
func (r *runner) finish(ctx context.Context, interrupted bool) (*Result, error) {
	if interrupted {
		for _, u := range r.units {
			if !r.Final(u.Unit) {
				r.stopTimers(u)
				r.Interrupt(u.Unit, "")
			}
		}
	}
	r.logs.stop()
	r.awaitAbandoned(ctx)
	dres, err := r.Finish(interrupted, nil)
	res := &Result{Result: *dres}
	r.Disp.Stop()
	switch {
	case r.o.Keep:
		r.Disp.Note("kept the run's objects: `kubectl delete %s -l %s -n %s` removes them", r.kinds(), r.selector(), r.c.Namespace)
	case res.State == record.Failed:
		r.Disp.Note("left the run's objects for inspection: `kubectl get %s,pods -l %s -n %s`; `kubectl delete %s -l %s -n %s` removes them",
			r.kinds(), r.selector(), r.c.Namespace, r.kinds(), r.selector(), r.c.Namespace)
	default:
		if interrupted {
			r.Disp.Note("deleting what run %s created (Ctrl-C again to stop waiting)", r.ID)
		}
		res.Left = r.cleanup(ctx, res.State == record.Succeeded)
		if len(res.Left) > 0 {
			r.Disp.Note("left on the cluster: %s; `kubectl delete %s -l %s -n %s` removes them", strings.Join(res.Left, ", "), r.kinds(), r.selector(), r.c.Namespace)
		}
	}
	r.Ended(res.State)
	return res, err
}

func (r *runner) kinds() string {
	var kinds []string
	for _, gvr := range createdKinds(r.units) {
		kinds = append(kinds, gvr.Resource)
	}
	return strings.Join(kinds, ",")
}
