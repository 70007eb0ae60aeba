package airflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// Polling of a followed run: PollMin after a change, doubling while nothing
// changes, up to PollMax.
const (
	PollMin = 500 * time.Millisecond
	PollMax = 5 * time.Second
)

// OutageLimit is how long Follow goes on asking an API server that does not
// answer before it gives up.
const OutageLimit = 2 * time.Minute

// logTail is how many lines of a failed task's log Follow prints.
const logTail = 40

// FollowOptions say where a followed run is shown and recorded.
type FollowOptions struct {
	// Root holds the run records; record.DefaultRoot when empty.
	Root string
	// Params are the run's params, for its record.
	Params map[string]string
	// Stdout receives the run's events and view, Stderr the logs of failed
	// tasks; io.Discard when nil.
	Stdout, Stderr io.Writer
	// Live redraws the view in place, on a terminal Width by Height.
	Live          bool
	Width, Height int
	// Tracer traces the run; nil traces nothing.
	Tracer *tracing.Tracer
	// Trace, when set, is the run's trace, begun when it was triggered (its
	// steps continue it through the conf's emit/airflow.ConfTraceParent):
	// Follow continues it rather than beginning one with Tracer.
	Trace *tracing.Run
	// OnInterrupt is asked, when ctx ends the follow, whether to stop the DAG
	// run (mark it failed) or leave it running; nil leaves it.
	OnInterrupt func() (stop bool)
}

// Result is how a followed run ended.
type Result struct {
	dag.Result
	// Stopped says an interrupted follow stopped the DAG run; otherwise an
	// interrupted run goes on in Airflow.
	Stopped bool
}

// unit is a dag unit and what the follower last saw of its task instance.
type unit struct {
	*dag.Unit
	try      int // the try last seen started
	retried  int // the try last seen up for retry
	finished bool
}

type follower struct {
	c     *Client
	r     *dag.Run
	o     FollowOptions
	dagID string
	units []*unit
	// byTask finds a unit by task id and map index.
	byTask map[string]map[int]*unit
	// resumed says the run is followed again, in the record an earlier
	// follow wrote.
	resumed bool
}

// stepOfTask returns the step of a task id of f's DAG: the step of that name,
// or the multi-node step whose Service task it is, or the step whose gate
// it is in a dynamic flow (its items or when task).
func stepOfTask(f *plan.Flow, task string) (string, bool) {
	for _, suffix := range []string{emitairflow.ServiceDeleteTaskSuffix, emitairflow.ServiceTaskSuffix} {
		if s, ok := strings.CutSuffix(task, suffix); ok && f.Step(s) != nil {
			return s, false
		}
	}
	if s, ok := gateStep(task); ok && f.Step(s) != nil {
		return s, false
	}
	return task, f.Step(task) != nil
}

// Follow follows run runID of DAG dagID, f's, until it ends (or ctx ends the
// follow), recording it under o.Root/<runID> as a run of runtime "airflow",
// with the shared live view and trace. A run already recorded there (one
// Clear made run again) is followed on in the same record: its steps that
// succeeded stay so. A failed task's log is printed, and kept in its record.
func (c *Client) Follow(ctx context.Context, f *plan.Flow, dagID, runID string, o FollowOptions) (*Result, error) {
	o = o.withDefaults()
	dir, lk, err := openRunDir(o.Root, dagID, runID)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	fl := newFollower(c, f, dagID, runID, dir, o)
	resumed, err := fl.open()
	if err != nil {
		return nil, err
	}
	fl.show(resumed)

	interrupted, err := fl.loop(ctx)
	res := &Result{}
	// The view stays on the screen; a question about the run goes below it.
	fl.r.Disp.Stop()
	if err != nil {
		fl.interruptOpen("Airflow stopped answering; the run may go on there")
	}
	if interrupted {
		res.Stopped = fl.interrupted(ctx)
	}
	ferr := fl.finish(res, interrupted, err != nil)
	if err != nil {
		return res, err
	}
	return res, ferr
}

// withDefaults is o with record.DefaultRoot for an empty Root and io.Discard
// for nil writers.
func (o FollowOptions) withDefaults() FollowOptions {
	if o.Root == "" {
		o.Root = record.DefaultRoot
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	return o
}

// openRunDir opens, locked, the directory of run runID's record under root.
func openRunDir(root, dagID, runID string) (string, io.Closer, error) {
	// The run's ID is Airflow's, and names the record's directory.
	if err := runid.CheckStore(runID); err != nil {
		return "", nil, fmt.Errorf("following run %s of DAG %s: %w", runID, dagID, err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", nil, err
	}
	dir, lk, err := record.Open(abs, runID)
	if err != nil {
		return "", nil, err
	}
	return dir, lk, nil
}

// newFollower is the follower of run runID of DAG dagID, f's, recorded in
// dir: one unit for each step, or for each item of a foreach step; a
// fan-out over a value found at run time gets its units (one per map index
// of its mapped task) when the dag core reads its items, from the producing
// task's XCom (dynamic).
func newFollower(c *Client, f *plan.Flow, dagID, runID, dir string, o FollowOptions) *follower {
	fl := &follower{c: c, r: dag.New(f, runID, dir), o: o, dagID: dagID, byTask: map[string]map[int]*unit{}}
	if f.Dynamic() != nil {
		fl.r.Dynamic = fl.dynamic(&fl.resumed)
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		fl.byTask[s.Name] = map[int]*unit{}
		for _, du := range dag.Units(s) {
			u := &unit{Unit: du}
			fl.units = append(fl.units, u)
			fl.byTask[s.Name][du.Index] = u
			fl.r.Add(u.Unit)
		}
	}
	return fl
}

// show begins the run's trace (or continues the one its trigger began) and
// starts its view, saying whether it is followed again (resumed).
func (fl *follower) show(resumed bool) {
	f, o := fl.r.Flow, fl.o
	fl.r.Trace = o.Trace
	if fl.r.Trace == nil {
		fl.r.Trace = o.Tracer.Begin(f, fl.r.ID, string(record.Airflow))
	}
	labels := make([]string, len(fl.units))
	for i, u := range fl.units {
		labels[i] = u.Label
	}
	fl.r.Disp = display.New(display.Options{
		Stdout: o.Stdout, Stderr: o.Stderr, Live: o.Live, Width: o.Width, Height: o.Height,
		Labels: labels, View: fl.r.StepView, StateColumn: 1,
	})
	verb := "following run"
	if resumed {
		verb = "following again run"
	}
	fl.r.Disp.Note("%s %s of DAG %s at %s: %s; record in %s", verb, fl.r.ID, fl.dagID, fl.c.URL(), display.Count(len(f.Steps), "step"), display.Rel(fl.r.Dir))
	fl.r.Disp.Start()
	fl.r.Release()
}

// interruptOpen marks every unit that has not ended interrupted, for why.
func (fl *follower) interruptOpen(why string) {
	for _, u := range fl.units {
		if !fl.r.Final(u.Unit) {
			fl.r.Interrupt(u.Unit, why)
		}
	}
}

// interrupted handles a follow ctx ended: it stops the DAG run when
// OnInterrupt says to, marks the units not ended interrupted, and returns
// whether the run was stopped.
func (fl *follower) interrupted(ctx context.Context) bool {
	why, stopped := "left running in Airflow", false
	if fl.o.OnInterrupt != nil && fl.o.OnInterrupt() {
		if _, serr := fl.c.Stop(context.WithoutCancel(ctx), fl.dagID, fl.r.ID); serr != nil {
			fl.r.Disp.Note("stopping DAG run %s: %v", fl.r.ID, serr)
		} else {
			stopped, why = true, "stopped: the DAG run was marked failed"
		}
	}
	fl.interruptOpen(why)
	return stopped
}

// finish ends the run's record into res and returns the follow's error: a
// run interrupted (not failed, by Airflow not answering) goes on in Airflow.
func (fl *follower) finish(res *Result, interrupted, failed bool) error {
	runID := fl.r.ID
	dres, ferr := fl.r.Finish(interrupted || failed, nil)
	res.Result = *dres
	if dres.State == record.Interrupted && !failed {
		// The run is Airflow's: it is not resumed with --run-id, as a local
		// run is.
		ferr = fmt.Errorf("stopped following run %s, which goes on in Airflow (retry %s follows it again): %w", runID, runID, dag.ErrInterrupted)
		if res.Stopped {
			ferr = fmt.Errorf("run %s %w and stopped in Airflow (retry %s runs its failed tasks again)", runID, dag.ErrInterrupted, runID)
		}
		fl.r.Rec.Error = ferr.Error()
		if werr := record.WriteRecord(fl.r.Dir, fl.r.Rec); werr != nil {
			fl.r.Disp.Note("recording run %s: %v", runID, werr)
		}
	}
	fl.r.Ended(dres.State)
	return ferr
}

// open writes the run's record, or reads back the one an earlier follow of the
// run wrote.
func (fl *follower) open() (bool, error) {
	f := fl.r.Flow
	fl.r.Rec = record.Record{
		Flow: f.Name, ID: fl.r.ID, State: record.Running, Start: time.Now().UTC(), PID: os.Getpid(),
		Params: fl.o.Params, Runtime: record.Airflow, Cluster: fl.c.URL(),
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		fl.r.Rec.Steps = append(fl.r.Rec.Steps, record.StepInfo{Name: s.Name, After: s.After, Items: len(s.Foreach)})
	}
	prev, err := record.ReadRecord(fl.r.Dir)
	resumed := err == nil
	fl.resumed = resumed
	switch {
	case resumed:
		if prev.Flow != f.Name || prev.Runtime != record.Airflow {
			return false, fmt.Errorf("run %s is recorded as a run of flow %s on %s, not of %s on Airflow", fl.r.ID, prev.Flow, cmp.Or(prev.Runtime, "this machine"), f.Name)
		}
		fl.r.Rec.Start, fl.r.Rec.Params = prev.Start, prev.Params
	case !errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("run %s: %w", fl.r.ID, err)
	}
	for _, u := range fl.units {
		if !resumed {
			if err := record.WriteTask(fl.r.Dir, fl.r.Task(u.Unit)); err != nil {
				return false, err
			}
			continue
		}
		prevTask, _ := record.ReadTask(fl.r.Dir, u.Step.Name, u.Index)
		if err := fl.r.Resume(u.Unit); err != nil {
			return false, err
		}
		if !u.Earlier {
			// Airflow counts tries on: the next is prevTask.Attempts+1.
			fl.r.Amend(u.Unit, func(t *record.Task) { t.Attempts = prevTask.Attempts })
		}
	}
	return resumed, record.WriteRecord(fl.r.Dir, fl.r.Rec)
}

// loop polls the DAG run and its task instances until the run ends, telling
// the dag run what changed; it returns true when ctx ended it.
func (fl *follower) loop(ctx context.Context) (bool, error) {
	wait := PollMin
	var failingSince time.Time
	for {
		run, tis, err := fl.poll(ctx)
		switch {
		case ctx.Err() != nil:
			return true, nil
		case err != nil && !transient(err):
			return false, fmt.Errorf("following run %s: %w", fl.r.ID, err)
		case err != nil:
			if failingSince.IsZero() {
				failingSince = time.Now()
				fl.r.Disp.Note("Airflow does not answer (%v); asking again", err)
			} else if time.Since(failingSince) > OutageLimit {
				return false, fmt.Errorf("following run %s: Airflow has not answered for %s: %w", fl.r.ID, OutageLimit, err)
			}
		default:
			if !failingSince.IsZero() {
				fl.r.Disp.Note("Airflow answers again")
				failingSince = time.Time{}
			}
			changed := fl.apply(ctx, tis)
			if run.Final() {
				// The run's last task states may have come after the run's:
				// read them once more.
				if tis, err = fl.c.TaskInstances(ctx, fl.dagID, fl.r.ID); err == nil {
					fl.apply(ctx, tis)
				}
				fl.settle(run)
				return false, nil
			}
			if changed {
				wait = PollMin
			}
		}
		select {
		case <-ctx.Done():
			return true, nil
		case <-time.After(wait):
		}
		wait = min(2*wait, PollMax)
	}
}

// transient reports whether an error of the API may go away if asked again:
// any but an answer that refuses the request.
func transient(err error) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return true
	}
	return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusRequestTimeout
}

func (fl *follower) poll(ctx context.Context) (*DAGRun, []TaskInstance, error) {
	run, err := fl.c.Run(ctx, fl.dagID, fl.r.ID)
	if err != nil {
		return nil, nil, err
	}
	tis, err := fl.c.TaskInstances(ctx, fl.dagID, fl.r.ID)
	return run, tis, err
}

// apply tells the dag run what the task instances show, in the flow's order so
// that a failure skips what waits for it before that is looked at; it reports
// whether anything changed.
func (fl *follower) apply(ctx context.Context, tis []TaskInstance) bool {
	own := map[*unit]*TaskInstance{}
	// failedOther holds, by step, a failed task of the step that is not its
	// own (a multi-node step's Service task).
	failedOther := map[string]string{}
	for i := range tis {
		ti := &tis[i]
		step, mine := stepOfTask(fl.r.Flow, ti.TaskID)
		if !mine {
			if ti.StateName() == "failed" {
				failedOther[step] = ti.TaskID
			}
			continue
		}
		if u := fl.byTask[step][ti.MapIndex]; u != nil {
			own[u] = ti
		}
	}
	changed := false
	for _, u := range fl.units {
		ti := own[u]
		if ti == nil || u.finished || fl.r.Final(u.Unit) {
			continue
		}
		if fl.applyOne(ctx, u, ti, failedOther[u.Step.Name]) {
			changed = true
			if fl.r.Final(u.Unit) {
				fl.r.Release()
			}
		}
	}
	return changed
}

// applyOne tells the dag run what task instance ti shows of unit u.
func (fl *follower) applyOne(ctx context.Context, u *unit, ti *TaskInstance, failedOther string) bool {
	r := fl.r
	if u.try > 0 && ti.TryNumber > u.try && u.retried < u.try {
		// The try seen running failed, and Airflow retried it, between two
		// looks: it is told as a try seen up for retry is.
		prev := *ti
		prev.TryNumber, prev.StartDate, prev.EndDate = u.try, nil, nil
		if start := r.Task(u.Unit).Start; !start.IsZero() {
			prev.StartDate = &start
		}
		u.retried = u.try
		r.Retried(u.Unit, u.try, fl.failure(ctx, u, &prev, false), 0)
	}
	switch st := ti.StateName(); st {
	case "none", "scheduled", "queued":
		return false
	case "running", "restarting", "deferred", "up_for_reschedule", "awaiting_input":
		return fl.start(u, ti)
	case "up_for_retry":
		if u.retried == ti.TryNumber {
			return false
		}
		fl.start(u, ti)
		u.retried = ti.TryNumber
		r.Retried(u.Unit, ti.TryNumber, fl.failure(ctx, u, ti, false), 0)
		return true
	case "success":
		fl.start(u, ti)
		u.finished = true
		r.Succeed(u.Unit, func(t *record.Task) { endAt(t, ti) })
		return true
	case "failed":
		fl.start(u, ti)
		u.finished = true
		r.Fail(u.Unit, fl.failure(ctx, u, ti, true), "failed", nil)
		r.Update(u.Unit, func(t *record.Task) { endAt(t, ti) })
		return true
	case "upstream_failed":
		u.finished = true
		msg := "not started: a task it waits for failed"
		if failedOther != "" {
			msg = "not started: its task " + failedOther + " failed"
		}
		r.Fail(u.Unit, msg, "UpstreamFailed", nil)
		return true
	case "skipped", "removed":
		u.finished = true
		r.Update(u.Unit, func(t *record.Task) { t.State, t.End, t.Error = record.Skipped, time.Now().UTC(), "Airflow "+st+" it" })
		r.Disp.Event(u.Label, true, "not started: Airflow %s it", st)
		return true
	default:
		return false
	}
}

// endAt sets the end of t to the task instance's end, on Airflow's clock.
func endAt(t *record.Task, ti *TaskInstance) {
	if ti.EndDate != nil && !ti.EndDate.Before(t.Start) {
		t.End = ti.EndDate.UTC()
	}
}

// start records that try ti.TryNumber of u runs, when it is new; Airflow's
// try number is the attempt's.
func (fl *follower) start(u *unit, ti *TaskInstance) bool {
	if u.try == ti.TryNumber {
		return false
	}
	u.try = ti.TryNumber
	var at time.Time
	if ti.StartDate != nil {
		at = *ti.StartDate
	}
	fl.r.Seen(u.Unit, ti.TryNumber, ti.TaskID, at)
	return true
}

// failure reads the log of the failed try ti of u: it keeps it in u's record,
// prints its last lines when show (the last try), and returns what it says
// went wrong.
func (fl *follower) failure(ctx context.Context, u *unit, ti *TaskInstance, show bool) string {
	msg := fmt.Sprintf("task %s failed in try %d", ti.TaskID, ti.TryNumber)
	log, err := fl.c.Log(ctx, fl.dagID, fl.r.ID, ti.TaskID, ti.MapIndex, ti.TryNumber)
	if err != nil {
		fl.r.Disp.Note("reading the log of %s: %v", u.Label, err)
		return msg
	}
	if log.Exception != "" {
		// What the view, the record and the trace say of the failure
		// withholds what looks like a credential, as every output does.
		msg += ": " + credential.Redact("", log.Exception)
	}
	dir := record.StateDir(fl.r.Dir, u.Step.Name, u.Index)
	if err := os.MkdirAll(dir, 0o755); err == nil {
		start := time.Now()
		if ti.StartDate != nil {
			start = *ti.StartDate
		}
		marker := record.AttemptMarker(ti.TryNumber, start)
		fh, err := os.OpenFile(filepath.Join(dir, record.StdoutLog), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = io.WriteString(fh, marker+log.Text())
			_ = fh.Close()
		}
	}
	if !show {
		return msg
	}
	lines := log.Tail(logTail)
	fmt.Fprintf(fl.o.Stderr, "last %s of the log of %s, try %d (logs --target airflow %s %s prints it all):\n", display.Count(len(lines), "line"), u.Label, ti.TryNumber, fl.r.ID, u.Step.Name)
	for _, l := range lines {
		fmt.Fprintln(fl.o.Stderr, display.Prefixed(u.Label, len(u.Label), credential.Redact("", l)))
	}
	return msg
}

// settle ends the units the run's end leaves unfinished: a DAG run marked
// failed from outside leaves tasks that never ran.
func (fl *follower) settle(run *DAGRun) {
	for _, u := range fl.units {
		if fl.r.Final(u.Unit) {
			continue
		}
		if run.State == RunFailed {
			fl.r.Update(u.Unit, func(t *record.Task) {
				t.State, t.End, t.Error = record.Skipped, time.Now().UTC(), "not started: DAG run "+run.ID+" failed first"
			})
			fl.r.Disp.Event(u.Label, true, "not started: the DAG run failed first")
		}
	}
}
