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
// outage longer than Options.OutageLimit fails it.
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

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
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
	// DefaultQPS and DefaultBurst limit the requests a run or check makes to the
	// API server: client-go's token bucket, DefaultQPS requests a second on
	// average with bursts of DefaultBurst. The runner watches rather than polls,
	// so these bound the creation and deletion of a wide fan-out; they leave room
	// for the cluster's own controllers on a shared API server.
	DefaultQPS   = 50
	DefaultBurst = 100
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
	name string
	// objects are created in order; the last is the Job or JobSet.
	objects []object
	// pods is how many pods run at once.
	pods int
	// pos is the unit's place in the run's units.
	pos int

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
	// byKey finds a unit by its Job's or JobSet's unitKey.
	byKey map[string]*unit
	// abandoned are the units deleted because they could not start.
	abandoned []*unit
}

// Run runs f on the cluster o names and returns how the run ended. The error is
// nil only when every step succeeded; with a Result it says which steps failed and
// why, or that ctx interrupted the run (ErrInterrupted). Without a Result nothing
// was created: the cluster could not be reached, or cannot run the flow (a missing
// namespace or API, RBAC refusal, or admission that refuses a dry run of what the
// run would create: RefusedError), and the error says what to do.
func Run(ctx context.Context, f *plan.Flow, o Options) (*Result, error) {
	var err error
	if o.As, err = kindAs(o.As); err != nil {
		return nil, err
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
	now := time.Now()
	id := o.RunID
	if id == "" {
		id = runid.New(now)
	} else if err := runid.Check(id); err != nil {
		return nil, err
	}

	c, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	var notes []string
	// checked is set when check has found every step's claim templates and
	// queues in place, which the preflight below need not ask again.
	checked := false
	if !o.NoCheck {
		report, err := c.check(ctx, f)
		switch {
		case errors.Is(err, errNodesForbidden), errors.Is(err, errDRAForbidden):
			// Placement is not checked: the preflight below notes the read
			// refused (Needs).
		case err != nil:
			return nil, err
		case !report.OK:
			return nil, &UnplaceableError{Report: report}
		default:
			checked = true
			var resolved []string
			f, resolved = placement.Resolve(f, report)
			notes = append(notes, resolved...)
		}
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
	rp := *f
	rp.Run, rp.RunUID, rp.Schedule = id, uid, ""
	units, errs := plan2units(&rp, o.As, c.namespace)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	steps := stepInfos(&rp, o.As, o.Build)
	var rerun map[string]bool
	if prev != nil {
		rerun, _ = dag.Changes(id, prev.Steps, steps)
	}
	namespaces := unitNamespaces(units)
	var claims []claim
	for _, u := range units {
		for _, v := range u.Step.Volumes {
			if cl := (claim{u.ns, v.Claim, u.Step.Name}); !slices.Contains(claims, cl) {
				claims = append(claims, cl)
			}
		}
	}
	sh := shapeOf(f, units, o.NoCheck)
	rbacNotes, err := c.preflight(ctx, namespaces, o.As, needs(sh))
	if err != nil {
		return nil, err
	}
	notes = append(notes, rbacNotes...)
	if err := c.claimsExist(ctx, claims); err != nil {
		return nil, err
	}
	if !checked {
		if err := c.claimTemplatesExist(ctx, units); err != nil {
			return nil, err
		}
		if err := c.queuesExist(ctx, units); err != nil {
			return nil, err
		}
	}

	// Admission answers for everything the run will create before any of it
	// exists, --no-check or not: a dry run creates nothing.
	refusals, dryNotes, err := c.dryRun(ctx, toCreate(filepath.Join(root, id), units, rerun))
	if err != nil {
		return nil, err
	}
	if len(refusals) > 0 {
		return nil, &RefusedError{Cluster: c.host, Refusals: refusals}
	}
	for _, n := range dryNotes {
		if !slices.Contains(notes, n) {
			notes = append(notes, n)
		}
	}
	// From here on the run outlives an API server that stops answering for a
	// while: requests are made again, and the run waits for it.
	if err := c.follow(o.OutageLimit); err != nil {
		return nil, err
	}
	defer c.reach.stop()
	dir, lk, err := record.Open(root, id)
	if err != nil {
		return nil, err
	}
	r := &runner{Run: dag.New(&rp, id, dir), o: o, c: c, units: units, byUnit: map[*dag.Unit]*unit{}, byKey: map[string]*unit{}}
	for i, u := range units {
		r.Add(u.Unit)
		u.pos = i
		r.byUnit[u.Unit] = u
		r.byKey[unitKey(u.ns, u.name)] = u
	}
	r.Trace = o.Tracer.Begin(&rp, id, "kube")
	defer lk.Close()
	resumed, changed, err := r.open(ctx, now, steps)
	if err != nil {
		return nil, err
	}
	if changed != "" {
		notes = append(notes, changed)
	}

	// A step waiting for Kueue is shown with its Workload's reason.
	workloads := false
	if sh.queued {
		if workloads, err = c.kueueServed(); err != nil {
			return nil, err
		}
	}
	r.w, err = watch(ctx, c, namespaces, sh.kinds, workloads, r.selector())
	if err != nil {
		return nil, err
	}
	defer r.w.stop()
	c.reach.setKick(r.w.kick)
	r.logs = newLogs(r)
	if err := r.adopt(ctx, resumed); err != nil {
		return nil, err
	}

	labels := make([]string, 0, len(units))
	for _, u := range units {
		labels = append(labels, u.Label)
		if u.Step.Nodes > 1 {
			labels = append(labels, rankLabel(u.Label, u.Step.Nodes-1))
		}
	}
	r.Disp = display.New(display.Options{
		Stdout: o.Stdout, Stderr: o.Stderr, Live: o.Live, Width: o.Width, Height: o.Height,
		Labels: labels, View: r.view, StateColumn: 1,
	})
	c.reach.setSay(r.Disp.Note)
	verb := "run"
	if resumed {
		verb = "resuming run"
	}
	r.Disp.Note("%s %s of flow %s: %s as %ss in namespace %s of %s (context %s); record in %s",
		verb, id, f.Name, display.Count(len(f.Steps), "step"), kindOf(o.As), strings.Join(namespaces, ", "), c.host, c.context, display.Rel(r.Dir))
	if f.Schedule != "" {
		r.Disp.Note("the flow's schedule (%s) does not apply: run --kube runs it once, now", f.Schedule)
	}
	for _, n := range notes {
		r.Disp.Note("%s", n)
	}
	r.Disp.Start()
	interrupted := r.loop(ctx)
	return r.finish(ctx, interrupted)
}

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
		objs, errs = job.Objects(f)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	var units []*unit
	var pending []object // a Service waits for the Job it precedes
	// A step's ResourceClaimTemplate precedes its Jobs; every unit of the step
	// creates it (or finds it made), so none waits for another.
	templates := map[string]object{}
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, field.ErrorList{field.InternalError(nil, err)}
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		var gvr schema.GroupVersionResource
		switch u.GetKind() {
		case "Service":
			pending = append(pending, object{serviceGVR, u})
			continue
		case "ResourceClaimTemplate":
			templates[u.GetLabels()[plan.LabelStep]] = object{resourceClaimTemplateGVR, u}
			continue
		case "Job":
			gvr = jobGVR
		case "JobSet":
			gvr = jobSetGVR
		default:
			return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("the %s target emitted a %s, which the runtime cannot run", as, u.GetKind()))}
		}
		s := f.Step(u.GetLabels()[plan.LabelStep])
		if s == nil {
			return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("%s %s has no step label", u.GetKind(), u.GetName()))}
		}
		index := -1
		if v, ok := u.GetLabels()[plan.LabelIndex]; ok && u.GetKind() == "Job" {
			index, _ = strconv.Atoi(v)
		}
		un := &unit{Unit: dag.NewUnit(s, index), ns: u.GetNamespace(), kind: u.GetKind(), name: u.GetName(), pods: s.Nodes}
		if u.GetKind() == "JobSet" && s.Foreach != nil {
			un.pods = s.Nodes * len(s.Foreach)
		}
		if t, ok := templates[s.Name]; ok {
			pending = append([]object{t}, pending...)
		}
		un.objects = append(pending, object{gvr, u})
		pending = nil
		units = append(units, un)
	}
	return units, nil
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
	ns := r.c.namespace
	r.Rec = record.Record{
		Flow: r.Flow.Name, ID: r.ID, UID: r.Flow.RunUID, State: record.Running, Start: now.UTC(), PID: os.Getpid(), Params: params,
		Runtime: record.Kube, Cluster: r.c.host, Context: r.c.context, Namespace: ns, As: r.o.As,
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
	case prev.Cluster != r.c.host:
		return fmt.Errorf("run %s ran on the cluster at %s, not %s: resume it with --context %s", prev.ID, prev.Cluster, r.c.host, prev.Context)
	case prev.Namespace != r.c.namespace:
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

// podRank returns the node rank of a pod of a multi-node step.
func podRank(p *corev1.Pod) string {
	return p.Annotations[emit.CompletionIndexAnnotation]
}
