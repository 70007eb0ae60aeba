// Package kube runs a compiled flow on a Kubernetes cluster: any cluster a
// kubeconfig reaches (kind on a laptop, EKS in production).
//
// Each step becomes exactly the objects the job target (or, with AsJobSet, the
// jobset target) emits for it — the runtime calls those emitters for a plan made
// for the run, so every object and pod carries the run's labels
// (manifold.dev/run, and manifold.dev/run-uid, the run's own UID) and a name of
// its own — and is created once every step it
// waits for has succeeded. Informers on the run's Jobs, JobSets and pods drive the
// run; nothing polls. Retries are the objects' own (a Job's backoffLimit, a
// JobSet's maxRestarts); a step that fails stops the steps that wait for it, while
// independent steps finish. Pods the scheduler cannot place are reported with its
// reason after a grace period, pod logs are streamed where the cluster serves
// them, and the run is recorded beside local runs (.manifold/runs/<id>/).
//
// A restarted or unreachable API server does not end the run: requests that get
// no answer are made again, the display says once that the API server was lost
// and once that it is back, the informers list anew, and the run carries on; an
// outage longer than Options.OutageLimit fails it. The connection, that following
// of outages, the pods' failure messages and the following of their logs are
// package runtimes/cluster's, which runtimes/argo shares.
//
// A run lists, watches and deletes only its own objects: those labelled with its
// flow, ID and UID together (runSelector), and it refuses to start beside objects
// of its flow and ID that another run made (ForeignError). An interrupt deletes
// everything the run created (foreground propagation, waiting until it is gone)
// unless Options.Keep; resuming a run ID runs again only the steps that did not
// succeed, and those that changed since (dag.Changes) with what waits for them.
package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	rcluster "github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// The ways a run creates its steps (Options.As).
const (
	// AsJob creates each step as the job target emits it: a Job per step (per
	// foreach item), an Indexed Job and headless Service for a multi-node step.
	AsJob = "job"
	// AsJobSet creates each step as the jobset target emits it: one JobSet.
	AsJobSet = "jobset"
)

// Defaults of Options.
const (
	// DefaultPendingGrace is how long a step's pods may wait to be scheduled before
	// the scheduler's reason is reported.
	DefaultPendingGrace = 2 * time.Minute
	// DefaultCleanupTimeout bounds the wait for a run's objects to be deleted.
	DefaultCleanupTimeout = 2 * time.Minute
	// DefaultOutageLimit bounds how long a run waits for an API server that
	// stopped answering before it fails (Options.OutageLimit).
	DefaultOutageLimit = 10 * time.Minute
	// DefaultQPS and DefaultBurst limit the requests a run or check makes to the
	// API server (rcluster.DefaultQPS and DefaultBurst).
	DefaultQPS   = rcluster.DefaultQPS
	DefaultBurst = rcluster.DefaultBurst
)

// Options say which cluster a flow runs on, and how.
type Options struct {
	// Kubeconfig is the kubeconfig file; "" resolves it as kubectl does
	// (KUBECONFIG, then ~/.kube/config).
	Kubeconfig string
	// Context is the kubeconfig context; "" uses its current context.
	Context string
	// Namespace holds the objects of steps without a namespace of their own; ""
	// uses the context's namespace, or "default".
	Namespace string
	// As is AsJob (the default) or AsJobSet.
	As string
	// Keep leaves the run's objects on the cluster when the run is interrupted or
	// succeeds. A failed run always leaves them, for inspection.
	Keep bool
	// RunID resumes that run when it is recorded, or names a new one.
	RunID string
	// Build is the flow program's build (dag.ProgramBuild), recorded for each
	// Run step: a resume runs again a Run step whose build changed, as it does
	// a step whose spec changed. "" records none.
	Build string
	// Root holds the run records; record.DefaultRoot when empty.
	Root string
	// PendingGrace is how long pods may wait to be scheduled before the reason is
	// reported (DefaultPendingGrace when 0). A pod that cannot pull its image fails
	// its step after PendingGrace.
	PendingGrace time.Duration
	// PendingTimeout, when positive, fails a step whose pods have waited that long
	// to be scheduled; otherwise such a step waits for as long as it takes.
	PendingTimeout time.Duration
	// CleanupTimeout bounds the wait for deleted objects to be gone
	// (DefaultCleanupTimeout when 0).
	CleanupTimeout time.Duration
	// OutageLimit is how long a run waits for an API server that stops answering
	// (restarted, or down) before it fails (DefaultOutageLimit when 0). While it
	// waits, it says once that it lost the API server, and once that it is back;
	// requests are made again, and the pending timeouts do not count the outage.
	OutageLimit time.Duration
	// QPS and Burst limit the requests made to the API server (DefaultQPS and
	// DefaultBurst when 0).
	QPS   float32
	Burst int
	// Requests, when set, counts every request made to the API server.
	Requests *Requests
	// NoCheck skips checking, before anything is created, that the cluster's nodes
	// can take every step (Check). The dry run of what the run creates, which
	// lets admission refuse it before it exists, is made all the same.
	NoCheck bool
	// Force, when it ends while an interrupted run deletes its objects, stops the
	// wait: Run returns at once and names what was left.
	Force context.Context
	// Stdout receives progress and the pods' logs, Stderr what the pods wrote to
	// it where the cluster tells them apart; io.Discard when nil.
	Stdout, Stderr io.Writer
	// Live redraws one line per step in place on Stdout, a terminal Width columns
	// wide and Height lines high; otherwise every event is a timestamped line.
	Live          bool
	Width, Height int
	// Tracer traces the run (package tracing), and gives each step's pods the
	// trace context of their step or item in TRACEPARENT; nil traces nothing.
	Tracer *tracing.Tracer
}

// Result is how a run ended.
type Result struct {
	dag.Result
	// Left names the objects still on the cluster after an interrupted run whose
	// cleanup was cut short.
	Left []string
}

// UnplaceableError is what Run returns when some step could never be scheduled on
// the cluster's nodes (see Check); nothing was created.
type UnplaceableError struct{ Report *placement.Report }

// Error names each step that cannot be placed and why, one per line.
func (e *UnplaceableError) Error() string {
	var lines []string
	for _, p := range e.Report.Unplaceable() {
		lines = append(lines, "step "+p.Step+" cannot be placed on the cluster at "+e.Report.Cluster+": "+p.Reason)
	}
	return strings.Join(lines, "\n") + "\n(`check` shows every step; --no-check runs anyway)"
}

// ErrInterrupted is what Run returns, wrapped, when its context ends the run.
var ErrInterrupted = dag.ErrInterrupted

// unit is what the runtime creates and watches as one: a Job (with a multi-node
// step's Service), or a JobSet. A step has one, or one per foreach item on the job
// target.
type unit struct {
	*dag.Unit
	ns   string
	kind string // "Job" or "JobSet"
	// workload reads the status of the unit's Job or JobSet.
	workload workload
	name     string
	// objects are created in order; the last is the Job or JobSet.
	objects []object
	// pods is how many pods run at once.
	pods int
	// pos is the unit's place in the run's units.
	pos int
	// fan is the fan-out the unit is an item of, whose objects (objects, name)
	// it shares with the others; nil for a unit with objects of its own.
	fan *fanOut

	// Guarded by the run's lock (dag.Run.Locked): what the view shows.
	ready int
	nodes []string

	// Only the loop uses the rest.
	created    bool
	seen       bool // the informer has shown the Job or JobSet
	stuckSince time.Time
	imageStuck bool
	reported   bool
	timers     []*time.Timer
	// queuedSince is when the unit was last seen waiting for Kueue, and
	// queuedFor the reason last shown for it.
	queuedSince time.Time
	queuedFor   string
	// last holds each pod of the unit as the caches last showed it (remember).
	last map[string]*corev1.Pod
}

type object struct {
	gvr schema.GroupVersionResource
	u   *unstructured.Unstructured
}

type runner struct {
	*dag.Run
	o    Options
	c    *cluster
	w    *watcher
	logs *logs

	units  []*unit
	byUnit map[*dag.Unit]*unit
	// byKey finds a unit by its key (unit.key).
	byKey map[string]*unit
	// fanOuts finds a fan-out by its Job's unitKey.
	fanOuts map[string]*fanOut
	// abandoned are the units deleted because they could not start.
	abandoned []*unit
	// resumed is set when the run resumes one recorded before.
	resumed bool
}

// Run runs f on the cluster o names and returns how the run ended. The error is
// nil only when every step succeeded; with a Result it says which steps failed and
// why, or that ctx interrupted the run (ErrInterrupted). Without a Result nothing
// was created: the cluster could not be reached, or cannot run the flow (a missing
// namespace or API, RBAC refusal, or admission that refuses a dry run of what the
// run would create: RefusedError), and the error says what to do.
func Run(ctx context.Context, f *plan.Flow, o Options) (*Result, error) {
	o, err := withDefaults(o)
	if err != nil {
		return nil, err
	}
	if errs := checkDynamic(f, o.As); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	now := time.Now()
	id, err := runid.Choose(o.RunID, now)
	if err != nil {
		return nil, err
	}
	c, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	p, err := c.prepare(ctx, f, o, id)
	if err != nil {
		return nil, err
	}
	// From here on the run outlives an API server that stops answering for a
	// while: requests are made again, and the run waits for it.
	if err := c.Follow(o.OutageLimit); err != nil {
		return nil, err
	}
	defer c.StopFollowing()
	store, err := dynamicStore(ctx, &p.rp, id)
	if err != nil {
		return nil, err
	}
	dir, lk, err := record.Open(p.root, id)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	r := newRunner(p, o, c, id, dir)
	resumed, changed, err := r.open(ctx, now, p.steps)
	if err != nil {
		return nil, err
	}
	r.resumed = resumed
	r.Dynamic = dag.Dynamic{Store: store, Made: func(us []*dag.Unit) error { return r.made(ctx, us) }}
	if changed != "" {
		p.notes = append(p.notes, changed)
	}
	if r.w, err = r.watchObjects(ctx, p); err != nil {
		return nil, err
	}
	defer r.w.stop()
	c.OnBack(r.w.kick)
	r.logs = newLogs(r)
	if err := r.adopt(ctx, resumed); err != nil {
		return nil, err
	}
	r.show(p, resumed)
	interrupted := r.loop(ctx)
	return r.finish(ctx, interrupted)
}

// withDefaults returns o with the defaults of Options filled in, or an error
// when o.As names no kind of object (kindAs).
func withDefaults(o Options) (Options, error) {
	var err error
	if o.As, err = kindAs(o.As); err != nil {
		return o, err
	}
	if o.Root == "" {
		o.Root = record.DefaultRoot
	}
	if o.PendingGrace <= 0 {
		o.PendingGrace = DefaultPendingGrace
	}
	if o.CleanupTimeout <= 0 {
		o.CleanupTimeout = DefaultCleanupTimeout
	}
	if o.OutageLimit <= 0 {
		o.OutageLimit = DefaultOutageLimit
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Force == nil {
		o.Force = context.Background()
	}
	return o, nil
}

// prepared is what a run knows before it records or creates anything.
type prepared struct {
	// f is the flow with its placement resolved, rp the run's plan of it.
	f  *plan.Flow
	rp plan.Flow
	// root holds the run records (Options.Root, absolute).
	root  string
	units []*unit
	// steps is what the record keeps of the steps (stepInfos).
	steps      []record.StepInfo
	namespaces []string
	sh         runShape
	// notes are said when the run starts.
	notes []string
}

// prepare makes run id's plan of f and its units, and asks the cluster
// whether it can run them, before anything is created: the nodes (place),
// the permissions, claims, claim templates and queues (ready), and admission
// (admit).
func (c *cluster) prepare(ctx context.Context, f *plan.Flow, o Options, id string) (*prepared, error) {
	f, notes, checked, err := c.place(ctx, f, o.NoCheck)
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	// The run's objects carry its UID, which its record keeps for a resume.
	prev, uid, err := previous(filepath.Join(root, id))
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	p := &prepared{f: f, rp: *f, root: root, notes: notes}
	p.rp.Run, p.rp.RunUID, p.rp.Schedule = id, uid, ""
	var errs field.ErrorList
	if p.units, errs = plan2units(&p.rp, o.As, c.Namespace); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	p.notes = append(p.notes, perItem(&p.rp, o.As)...)
	p.steps = stepInfos(&p.rp, o.As, o.Build)
	var rerun map[string]bool
	if prev != nil {
		rerun, _ = dag.Changes(id, prev.Steps, p.steps)
	}
	p.namespaces = unitNamespaces(p.units)
	p.sh = shapeOf(f, p.units, o.NoCheck)
	if err := c.ready(ctx, p, o.As, checked); err != nil {
		return nil, err
	}
	if err := c.admit(ctx, p, toCreate(filepath.Join(root, id), p.units, rerun)); err != nil {
		return nil, err
	}
	return p, nil
}

// place checks, unless noCheck, that the cluster's nodes can take every step
// of f (Check), and resolves f's placement from what it found
// (placement.Resolve). It returns f so resolved, the notes of what it
// resolved, and whether the check found every step's claim templates and
// queues in place, which need not be asked again. Where the cluster refuses
// to show its nodes or devices, placement is not checked: the preflight notes
// the read refused (Needs).
func (c *cluster) place(ctx context.Context, f *plan.Flow, noCheck bool) (*plan.Flow, []string, bool, error) {
	if noCheck {
		return f, nil, false, nil
	}
	report, err := c.check(ctx, f)
	switch {
	case errors.Is(err, errNodesForbidden), errors.Is(err, errDRAForbidden):
		return f, nil, false, nil
	case err != nil:
		return nil, nil, false, err
	case !report.OK:
		return nil, nil, false, &UnplaceableError{Report: report}
	}
	f, resolved := placement.Resolve(f, report)
	return f, resolved, true, nil
}

// ready checks that the run of p, made as as, may make its objects in its
// namespaces (preflight, whose notes it adds to p's) and that the volume
// claims its steps mount exist; unless checked (place), also that its claim
// templates and queues do.
func (c *cluster) ready(ctx context.Context, p *prepared, as string, checked bool) error {
	rbacNotes, err := c.preflight(ctx, p.namespaces, as, needs(p.sh))
	if err != nil {
		return err
	}
	p.notes = append(p.notes, rbacNotes...)
	if err := c.claimsExist(ctx, unitClaims(p.units)); err != nil {
		return err
	}
	if checked {
		return nil
	}
	if err := c.claimTemplatesExist(ctx, p.units); err != nil {
		return err
	}
	return c.queuesExist(ctx, p.units)
}

// unitClaims returns the volume claims the steps of units mount, each once
// per namespace.
func unitClaims(units []*unit) []claim {
	var claims []claim
	for _, u := range units {
		for _, v := range u.Step.Volumes {
			if cl := (claim{u.ns, v.Claim, u.Step.Name}); !slices.Contains(claims, cl) {
				claims = append(claims, cl)
			}
		}
	}
	return claims
}

// admit has admission answer for everything the run will create (units)
// before any of it exists, --no-check or not: a dry run creates nothing. It
// returns a RefusedError when admission refuses any of it, and adds to p's
// notes what the dry run noted.
func (c *cluster) admit(ctx context.Context, p *prepared, units []*unit) error {
	refusals, dryNotes, err := c.dryRun(ctx, units)
	if err != nil {
		return err
	}
	if len(refusals) > 0 {
		return &RefusedError{Cluster: c.Host, Refusals: refusals}
	}
	for _, n := range dryNotes {
		if !slices.Contains(p.notes, n) {
			p.notes = append(p.notes, n)
		}
	}
	return nil
}

// newRunner returns the runner of run id of p, recorded in dir, with its
// units added to the run and traced by o.Tracer.
func newRunner(p *prepared, o Options, c *cluster, id, dir string) *runner {
	r := &runner{Run: dag.New(&p.rp, id, dir), o: o, c: c, byUnit: map[*dag.Unit]*unit{}, byKey: map[string]*unit{}, fanOuts: map[string]*fanOut{}}
	r.add(p.units, false)
	r.Trace = o.Tracer.Begin(&p.rp, id, "kube")
	return r
}

// watchObjects starts the informers on the run's objects in p's namespaces. A step
// waiting for Kueue is shown with its Workload's reason, so the Workloads are
// watched too when a step is queued and the cluster serves them.
func (r *runner) watchObjects(ctx context.Context, p *prepared) (*watcher, error) {
	workloads := false
	if p.sh.queued {
		var err error
		if workloads, err = r.c.kueueServed(); err != nil {
			return nil, err
		}
	}
	return watch(ctx, r.c, p.namespaces, p.sh.kinds, workloads, r.selector())
}

// show sets up the run's display, one row per unit (and per node rank of a
// multi-node unit), says what the run is and p's notes, and starts it.
func (r *runner) show(p *prepared, resumed bool) {
	o, c, f := r.o, r.c, p.f
	labels := make([]string, 0, len(p.units))
	for _, u := range p.units {
		labels = append(labels, u.Label)
		if u.Step.Nodes > 1 {
			labels = append(labels, rankLabel(u.Label, u.Step.Nodes-1))
		}
	}
	r.Disp = display.New(display.Options{
		Stdout: o.Stdout, Stderr: o.Stderr, Live: o.Live, Width: o.Width, Height: o.Height,
		Labels: labels, View: r.view, StateColumn: 1,
	})
	c.SayTo(r.Disp.Note)
	verb := "run"
	if resumed {
		verb = "resuming run"
	}
	r.Disp.Note("%s %s of flow %s: %s as %ss in namespace %s of %s (context %s); record in %s",
		verb, r.ID, f.Name, display.Count(len(f.Steps), "step"), kindOf(o.As), strings.Join(p.namespaces, ", "), c.Host, c.Context, display.Rel(r.Dir))
	if f.Schedule != "" {
		r.Disp.Note("the flow's schedule (%s) does not apply: run --kube runs it once, now", f.Schedule)
	}
	for _, n := range p.notes {
		r.Disp.Note("%s", n)
	}
	r.Disp.Start()
}

// kindOf returns the kind of object a run made as as creates for a step.
func kindOf(as string) string {
	if as == AsJobSet {
		return "JobSet"
	}
	return "Job"
}

// kindAs returns the kind of object Options.As asks steps to be made as: AsJob
// when it says nothing, or an error that says what to choose.
func kindAs(as string) (string, error) {
	switch as {
	case "":
		return AsJob, nil
	case AsJob, AsJobSet:
		return as, nil
	}
	return "", fmt.Errorf("--as %q: choose %s or %s", as, AsJob, AsJobSet)
}

// toCreate returns the units a run recorded in dir will create: all of them,
// but for a resumed run those it recorded as succeeded (for the same item) of
// the steps it does not run again (rerun: dag.Changes).
func toCreate(dir string, units []*unit, rerun map[string]bool) []*unit {
	if _, err := os.Stat(dir); err != nil {
		return units
	}
	var out []*unit
	for _, u := range units {
		if _, earlier, err := dag.Earlier(dir, u.Unit); err == nil && earlier && !rerun[u.Step.Name] {
			continue
		}
		out = append(out, u)
	}
	return out
}

// plan2units builds the run's objects with the target's emitter and groups them
// into units.
func plan2units(f *plan.Flow, as, namespace string) ([]*unit, field.ErrorList) {
	var objs []any
	var errs field.ErrorList
	if as == AsJobSet {
		objs, errs = jobset.Objects(f)
	} else {
		objs, errs = job.RunObjects(f)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return group(f, objs, namespace, nil)
}

// group groups objs, objects of f's steps in the order they are created, into
// units, in namespace unless an object names its own. items are the units of
// the run of a fan-out over a value found at run time whose objects objs are;
// nil takes the units of each step from the plan (dag.Units).
func group(f *plan.Flow, objs []any, namespace string, items []*dag.Unit) ([]*unit, field.ErrorList) {
	unitOf := func(s *plan.Step, index int) *dag.Unit {
		if items != nil {
			return items[index]
		}
		return dag.NewUnit(s, index)
	}
	var units []*unit
	var pending []object // a Service waits for the Job it precedes
	// A step's ResourceClaimTemplate precedes its Jobs; every unit of the step
	// creates it (or finds it made), so none waits for another.
	templates := map[string]object{}
	for _, o := range objs {
		u, err := toUnstructured(o, namespace)
		if err != nil {
			return nil, field.ErrorList{field.InternalError(nil, err)}
		}
		var gvr schema.GroupVersionResource
		var wl workload
		switch u.GetKind() {
		case "Service":
			pending = append(pending, object{serviceGVR, u})
			continue
		case "ConfigMap":
			pending = append(pending, object{configMapGVR, u})
			continue
		case "ResourceClaimTemplate":
			templates[u.GetLabels()[plan.LabelStep]] = object{resourceClaimTemplateGVR, u}
			continue
		case "Job":
			gvr, wl = jobGVR, jobWorkload{}
		case "JobSet":
			gvr, wl = jobSetGVR, jobSetWorkload{}
		default:
			return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("the runtime cannot run a %s", u.GetKind()))}
		}
		s := f.Step(u.GetLabels()[plan.LabelStep])
		if s == nil {
			return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("%s %s has no step label", u.GetKind(), u.GetName()))}
		}
		if t, ok := templates[s.Name]; ok {
			pending = append([]object{t}, pending...)
		}
		objects := append(pending, object{gvr, u})
		pending = nil
		if u.GetKind() == "Job" && s.FansOut() && u.GetLabels()[plan.LabelIndex] == "" && s.Nodes <= 1 {
			fan := items
			if fan == nil {
				fan = dag.Units(s)
			}
			units = append(units, fanOutUnits(s, objects, fan)...)
			continue
		}
		index := -1
		if v, ok := u.GetLabels()[plan.LabelIndex]; ok && u.GetKind() == "Job" {
			index, _ = strconv.Atoi(v)
		}
		un := &unit{Unit: unitOf(s, index), ns: u.GetNamespace(), kind: u.GetKind(), workload: wl, name: u.GetName(), pods: s.Nodes, objects: objects}
		if u.GetKind() == "JobSet" && s.Foreach != nil {
			un.pods = s.Nodes * len(s.Foreach)
		}
		units = append(units, un)
	}
	return units, nil
}

// toUnstructured returns the typed object o as the runtime creates it, in
// namespace ns unless it names its own.
func toUnstructured(o any, ns string) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetNamespace() == "" {
		u.SetNamespace(ns)
	}
	return u, nil
}

// open writes the run's record, with steps (stepInfos), or reads it back to
// resume the run; it returns whether it resumed, and what to say of the steps
// that changed since (dag.Run.Resuming). Before it writes anything it refuses
// a run whose flow and ID other objects on the cluster carry (foreign).
func (r *runner) open(ctx context.Context, now time.Time, steps []record.StepInfo) (bool, string, error) {
	params := map[string]string{}
	for _, p := range r.Flow.Params {
		params[p.Name] = p.Value
	}
	ns := r.c.Namespace
	r.Rec = record.Record{
		Flow: r.Flow.Name, ID: r.ID, UID: r.Flow.RunUID, State: record.Running, Start: now.UTC(), PID: os.Getpid(), Params: params,
		Runtime: record.Kube, Cluster: r.c.Host, Context: r.c.Context, Namespace: ns, As: r.o.As,
	}
	if a := r.Flow.Artifacts; a != nil {
		r.Rec.Artifacts = &record.Artifacts{URL: a.URL, Endpoint: a.Endpoint, Claim: a.Claim}
	}
	prev, err := record.ReadRecord(r.Dir)
	resumed := err == nil
	switch {
	case resumed:
		if err := r.resumable(prev, params); err != nil {
			return false, "", err
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, "", fmt.Errorf("run %s: %w", r.ID, err)
	}
	// (A run recorded without a UID gets one now: the objects it made
	// without one are not taken for its own.)
	if resumed && prev.UID != "" && prev.UID != r.Flow.RunUID {
		return false, "", fmt.Errorf("run %s was recorded anew by another runner while this one started: try again", r.ID)
	}
	if err := r.foreign(ctx); err != nil {
		return false, "", err
	}
	r.Rec.Steps = steps
	changed := ""
	if resumed {
		changed = r.Resuming(prev)
	}
	// A new run records every unit pending; a resumed one keeps what succeeded
	// and rewrites what its earlier runner left of the rest (dag.Run.Resume).
	for _, u := range r.units {
		var err error
		if resumed {
			err = r.Resume(u.Unit)
		} else {
			err = record.WriteTask(r.Dir, r.Task(u.Unit))
		}
		if err != nil {
			return false, "", err
		}
	}
	return resumed, changed, record.WriteRecord(r.Dir, r.Rec)
}

// stepInfos is what a run of f, made as as, records of its steps (dag.StepInfo)
// with build, the flow program's: the job target's foreach items one by one.
func stepInfos(f *plan.Flow, as, build string) []record.StepInfo {
	var out []record.StepInfo
	for i := range f.Steps {
		s := &f.Steps[i]
		items := 0
		if as == AsJob {
			items = len(s.Foreach)
		}
		out = append(out, dag.StepInfo(s, items, build))
	}
	return out
}

// resumable checks that run prev can be resumed by this runner.
func (r *runner) resumable(prev *record.Record, params map[string]string) error {
	if err := record.Resumable(prev, r.Flow.Name, params); err != nil {
		return err
	}
	switch {
	case prev.Runtime != record.Kube:
		return fmt.Errorf("run %s ran on this machine: resume it with `run --run-id %s` (without --kube), or start a new cluster run", prev.ID, prev.ID)
	case prev.Cluster != r.c.Host:
		return fmt.Errorf("run %s ran on the cluster at %s, not %s: resume it with --context %s", prev.ID, prev.Cluster, r.c.Host, prev.Context)
	case prev.Namespace != r.c.Namespace:
		return fmt.Errorf("run %s ran in namespace %s: resume it with --namespace %s", prev.ID, prev.Namespace, prev.Namespace)
	case prev.As != r.o.As:
		return fmt.Errorf("run %s ran as %s: resume it with --as %s", prev.ID, prev.As, prev.As)
	}
	return nil
}

// rankLabel is the output label of node rank of a multi-node unit.
func rankLabel(label string, rank int) string {
	return label + "/" + strconv.Itoa(rank)
}
