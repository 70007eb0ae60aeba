// Package dag is the scheduling core every runtime shares: the units of a run
// (a whole step, or one item of a foreach step), their states and how they
// change, which steps are ready, which are skipped because a step they wait for
// did not succeed, how the run ended and the message that says why, and the rows
// the live view shows. Each state change is written to the run's record (package
// record), told on the run's display (package display) and, when the run is
// traced, to its trace (package tracing), so every runtime's runs are traced
// alike.
//
// A runtime keeps only what is its own: how it starts a unit, watches it and
// stops it. It adds the units, calls Release for those it may start, reports
// what each unit does (Start, or Begin for an attempt it starts itself, Seen
// for one its engine started and numbers itself; Succeed, Fail, Interrupt,
// Update; Failed, or Retry, for a failed attempt retried after Backoff, by
// the runtime or by an engine that waits as long; Retried, for one its engine
// retries when it will), and calls Finish when none is left. The words that
// tell an attempt and a retry are the core's alone (AttemptOf names one among
// a step's): a runtime says only what happened. Run.Now is the clock of the
// times recorded.
package dag

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// ErrInterrupted is what a run returns, wrapped, when its context ends it.
var ErrInterrupted = errors.New("interrupted")

// Unit is what a runtime starts and follows: a step, or one item of a foreach
// step.
type Unit struct {
	Step *plan.Step
	// Index is the foreach item, -1 for a unit that runs the whole step.
	Index int
	// Label names the unit in events and the view: the step, or step[index].
	Label string
	// Item is the foreach item's text (MANIFOLD_ITEM), "" for a whole step,
	// and ItemJSON an item of a fan-out over a run-time value, as JSON.
	Item     string
	ItemJSON json.RawMessage
	// Earlier is set when an earlier runner of this run ran the unit to success;
	// it is not run again.
	Earlier bool

	// rec is guarded by Run.mu, and added, set once the unit is one of the
	// run's (Add): a unit the runtime resumes before (Resume, as it does the
	// units a fan-out makes at run time) is counted when it is added, in the
	// state it resumed in.
	rec   record.Task
	added bool
}

// NewUnit returns the pending unit of step s, or of its item index (-1 for the
// whole step).
func NewUnit(s *plan.Step, index int) *Unit {
	u := &Unit{Step: s, Index: index, rec: record.Task{Step: s.Name, State: record.Pending}}
	if index >= 0 && index < len(s.Foreach) {
		u.rec.Index, u.rec.Item = new(index), s.Foreach[index]
		u.Item = s.Foreach[index]
	}
	u.Label = u.rec.Label()
	return u
}

// Result is how a run ended.
type Result struct {
	ID string
	// Dir is the run directory.
	Dir   string
	State record.State
	// Failed holds the steps and items that failed, in flow order.
	Failed []record.Task
	// NotStarted names the steps skipped because a step they wait for failed.
	NotStarted []string
}

// Run is the state of one run of a flow: its record and its units'.
type Run struct {
	Flow *plan.Flow
	ID   string
	// Dir is the run directory.
	Dir string
	// Rec is the run's record (run.json); Finish writes how the run ended into it.
	Rec record.Record
	// Disp tells what happens; set it before the first state change.
	Disp *display.Display
	// Now is the clock of the units' and the run's start and end times;
	// time.Now when nil. A test runner gives a fake clock here.
	Now func() time.Time
	// Trace is the run's trace (tracing.Tracer.Begin), nil when it is not
	// traced: every change of a unit's record is told to it, and Finish ends it.
	Trace *tracing.Run
	// Rerun holds the steps a resume runs again however they ended before
	// (Resuming): they, or a step they wait for, changed since.
	Rerun map[string]bool
	// Dynamic is what a flow with sdk.ForeachOf or sdk.When steps needs.
	Dynamic Dynamic

	mu       sync.Mutex
	units    []*Unit
	steps    map[string][]*Unit
	released map[string]bool
	// counts holds, per step, how many of its units are in each state, and
	// unfinished how many units of the run are not final: kept as states
	// change, so that a step's state costs the same however many items it has.
	counts     map[string]map[record.State]int
	unfinished int
	// touched holds the steps whose state may have changed since Release last
	// looked; Release looks again only at the steps that wait for them.
	touched map[string]bool
	// dependents lists, per step, the index in Flow.Steps of each step that
	// waits for it, and cursor, per step, how many of its After have been seen
	// to succeed (success is final); both made by the first Release.
	dependents map[string][]int
	cursor     []int
	// notTaken holds the steps not taken (a branch), and expanded the fan-outs
	// over run-time values whose units have been made; fanOuts holds those
	// steps.
	notTaken, expanded, fanOuts map[string]bool
	// writeErr is the first failure to record a unit's state.
	writeErr error
	// open is the index in Rec.Spans of an earlier runner's span that has no
	// end (the runner was killed), -1 for none: Resume ends it at the last
	// time that runner's units recorded.
	open int
}

// New returns the run id of flow f, kept in dir, without units.
func New(f *plan.Flow, id, dir string) *Run {
	r := &Run{Flow: f, ID: id, Dir: dir, steps: map[string][]*Unit{}, released: map[string]bool{},
		counts: map[string]map[record.State]int{}, touched: map[string]bool{}, open: -1,
		notTaken: map[string]bool{}, expanded: map[string]bool{}, fanOuts: map[string]bool{}}
	for i := range f.Steps {
		if f.Steps[i].ForeachOf != nil {
			r.fanOuts[f.Steps[i].Name] = true
		}
	}
	return r
}

// now reads the run's clock, in UTC.
func (r *Run) now() time.Time {
	if r.Now != nil {
		return r.Now().UTC()
	}
	return time.Now().UTC()
}

// Add adds units to the run, in flow order.
func (r *Run) Add(us ...*Unit) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range us {
		r.units = append(r.units, u)
		r.steps[u.Step.Name] = append(r.steps[u.Step.Name], u)
		u.added = true
		r.count(u, u.rec.State, 1)
	}
}

// count adds n to the units of u's step in state st; callers hold r.mu.
func (r *Run) count(u *Unit, st record.State, n int) {
	c := r.counts[u.Step.Name]
	if c == nil {
		c = map[record.State]int{}
		r.counts[u.Step.Name] = c
	}
	if c[st] += n; c[st] == 0 {
		delete(c, st)
	}
	if !st.Final() {
		r.unfinished += n
	}
	r.touched[u.Step.Name] = true
}

// change applies change to u's record and keeps the counts; callers hold r.mu.
func (r *Run) change(u *Unit, change func(*record.Task)) {
	old := u.rec.State
	change(&u.rec)
	if u.rec.State != old && u.added {
		r.count(u, old, -1)
		r.count(u, u.rec.State, 1)
	}
}

// Unfinished is how many of the run's units have not ended.
func (r *Run) Unfinished() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unfinished
}

// Resume takes over what an earlier runner of this run recorded of unit u: when
// it succeeded (for the same item) and its step is not to run again (Rerun) u
// is Earlier and keeps that record; otherwise a record left by that runner is
// stale, and is written anew as pending.
func (r *Run) Resume(u *Unit) error {
	prev, earlier, err := Earlier(r.Dir, u)
	if err != nil {
		return err
	}
	if r.open >= 0 {
		sp := &r.Rec.Spans[r.open]
		for _, at := range []time.Time{prev.Start, prev.End} {
			if at.After(sp.End) {
				sp.End = at.UTC()
			}
		}
	}
	earlier = earlier && !r.Rerun[u.Step.Name]
	if earlier {
		r.mu.Lock()
		r.change(u, func(t *record.Task) { *t = prev })
		r.mu.Unlock()
		u.Earlier = true
		return nil
	}
	// A task without state.json reads as pending; one with it is rewritten.
	if _, err := os.Stat(filepath.Join(record.StateDir(r.Dir, u.Step.Name, u.Index), record.StateFile)); err == nil {
		return record.WriteTask(r.Dir, u.rec)
	}
	return nil
}

// Earlier returns what an earlier runner of the run kept in dir recorded of
// unit u, and whether u succeeded then, for the same item, and not stubbed:
// such a unit is not run again.
func Earlier(dir string, u *Unit) (record.Task, bool, error) {
	prev, err := record.ReadTask(dir, u.Step.Name, u.Index)
	if err != nil {
		return prev, false, err
	}
	return prev, prev.State == record.Succeeded && !prev.Stubbed && prev.Item == u.rec.Item, nil
}

// Task returns a copy of u's record.
func (r *Run) Task(u *Unit) record.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	return u.rec
}

// Final reports whether u has ended.
func (r *Run) Final(u *Unit) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return u.rec.State.Final()
}

// Locked calls f with the run's lock held, the lock the view is built under: a
// runtime changes what its view columns show (View) inside f.
func (r *Run) Locked(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

// Amend changes u's record in memory; the next Update writes it.
func (r *Run) Amend(u *Unit, change func(*record.Task)) {
	r.mu.Lock()
	r.change(u, change)
	r.mu.Unlock()
}

// Update changes u's record and writes it. The first write that fails is told,
// and fails the run at Finish.
func (r *Run) Update(u *Unit, change func(*record.Task)) {
	r.mu.Lock()
	before := u.rec
	r.change(u, change)
	rec := u.rec
	if r.Trace != nil {
		r.Trace.Changed(u.Step, u.Index, u.Label, before, rec, r.stepState(u.Step.Name))
	}
	r.mu.Unlock()
	if err := record.WriteTask(r.Dir, rec); err != nil {
		r.mu.Lock()
		first := r.writeErr == nil
		if first {
			r.writeErr = err
		}
		r.mu.Unlock()
		if first && r.Disp != nil {
			r.Disp.Note("recording the state of %s: %v", u.Label, err)
		}
	}
}

// StepState sums up the state of a step from its units': see Summary.
func (r *Run) StepState(step string) record.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stepState(step)
}

// Summary is the state of a step from its units' records: running while any
// runs (or some have ended and others wait to start), retrying while one waits
// to retry, queued while one waits for a queue, pending while none has started;
// once all have ended, failed if any failed, else interrupted if any was, else
// skipped if any was; succeeded when all did.
func Summary(ts []record.Task) record.State {
	counts := map[record.State]int{}
	for _, t := range ts {
		counts[t.State]++
	}
	return fromCounts(counts, len(ts))
}

// fromCounts is Summary of total units of which counts[s] are in state s.
func fromCounts(counts map[record.State]int, total int) record.State {
	final := 0
	for st, n := range counts {
		if st.Final() {
			final += n
		}
	}
	switch {
	case counts[record.Running] > 0:
		return record.Running
	case counts[record.Retrying] > 0:
		return record.Retrying
	case counts[record.Queued] > 0:
		return record.Queued
	case final < total && final > 0:
		return record.Running // some items done, others waiting to start
	case final < total:
		return record.Pending
	case counts[record.Failed] > 0:
		return record.Failed
	case counts[record.Interrupted] > 0:
		return record.Interrupted
	case counts[record.Skipped] > 0:
		return record.Skipped
	}
	return record.Succeeded
}

// stepState is StepState; callers hold r.mu.
func (r *Run) stepState(step string) record.State {
	if r.fanOuts[step] && !r.expanded[step] {
		return record.Pending // its units are yet to be made
	}
	return fromCounts(r.counts[step], len(r.steps[step]))
}

// Release returns the units to start now: those of every step, not released
// before, whose dependencies all succeeded, in flow order. A unit that succeeded
// in an earlier runner is told and not returned. The pending units of a step
// that waits for one that failed, was skipped or was interrupted are skipped.
//
// Only the steps that wait for a step whose state may have changed since the
// last call are looked at, each from the first of its dependencies not yet seen
// to succeed: a run's calls cost, all together, about the size of its graph.
func (r *Run) Release() []*Unit {
	var ready []*Unit
	first := r.dependents == nil
	if first {
		r.indexDependents()
	}
	for {
		look, blockers := r.toLook(first)
		first = false
		if len(look) == 0 {
			return ready
		}
		slices.Sort(look)
		for _, i := range look {
			s := &r.Flow.Steps[i]
			if r.released[s.Name] {
				continue
			}
			if blocker, ok := blockers[i]; ok {
				r.skipStep(s, blocker)
				continue
			}
			ready = r.releaseStep(i, ready)
		}
	}
}

// indexDependents records, for Release's first call, the steps that wait for
// each step, and starts each step's cursor at its first dependency.
func (r *Run) indexDependents() {
	r.dependents = map[string][]int{}
	r.cursor = make([]int, len(r.Flow.Steps))
	for i := range r.Flow.Steps {
		for _, a := range r.Flow.Steps[i].After {
			r.dependents[a] = append(r.dependents[a], i)
		}
	}
}

// toLook returns the steps Release looks at: on its first call every step,
// then those not yet released that wait for a step touched since. blockers[i]
// names a dependency of step i that ended without success.
func (r *Run) toLook(first bool) (look []int, blockers map[int]string) {
	blockers = map[int]string{}
	r.mu.Lock()
	defer r.mu.Unlock()
	defer clear(r.touched)
	if first {
		for i := range r.Flow.Steps {
			look = append(look, i)
			for _, a := range r.Flow.Steps[i].After {
				if st := r.stepState(a); r.blocks(a, st) {
					blockers[i] = a + " " + string(st)
					break
				}
			}
		}
		return look, blockers
	}
	seen := map[int]bool{}
	for step := range r.touched {
		st := r.stepState(step)
		for _, i := range r.dependents[step] {
			if r.released[r.Flow.Steps[i].Name] {
				continue
			}
			if !seen[i] {
				seen[i] = true
				look = append(look, i)
			}
			if _, ok := blockers[i]; !ok && r.blocks(step, st) {
				blockers[i] = step + " " + string(st)
			}
		}
	}
	return look, blockers
}

// skipStep releases step s without running it: its pending units are skipped,
// not started because of blocker.
func (r *Run) skipStep(s *plan.Step, blocker string) {
	r.released[s.Name] = true
	r.wholeStep(s)
	for _, u := range r.steps[s.Name] {
		if r.Task(u).State != record.Pending {
			continue
		}
		r.Update(u, func(t *record.Task) { t.State, t.Error = record.Skipped, "not started: "+blocker })
		r.Disp.Event(u.Label, true, "not started: %s", blocker)
	}
}

// releaseStep releases step i once all its dependencies succeeded, moving its
// cursor past those seen to, and appends to ready its units to start: those not
// final, nor succeeded in an earlier runner, which are told.
func (r *Run) releaseStep(i int, ready []*Unit) []*Unit {
	s := &r.Flow.Steps[i]
	for r.cursor[i] < len(s.After) && r.passed(s.After[r.cursor[i]]) {
		r.cursor[i]++
	}
	if r.cursor[i] < len(s.After) {
		return ready
	}
	r.released[s.Name] = true
	if units, done := r.dynamicRelease(s); done {
		return append(ready, units...)
	}
	for _, u := range r.steps[s.Name] {
		switch {
		case u.Earlier:
			r.Disp.Event(u.Label, false, "succeeded in an earlier attempt of this run: not run again")
		case !r.Final(u):
			ready = append(ready, u)
		}
	}
	return ready
}

// blocks reports whether step, in state st, keeps the steps that wait for it
// from ever starting: it failed, was interrupted, or was skipped for either
// (a step not taken does not block: a join after a branch waits only for the
// branch taken). Callers hold r.mu.
func (r *Run) blocks(step string, st record.State) bool {
	return st == record.Failed || st == record.Interrupted || st == record.Skipped && !r.notTaken[step]
}

// passed reports whether the steps that wait for step may go as far as it
// goes: it succeeded, or was not taken.
func (r *Run) passed(step string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.notTaken[step] || r.stepState(step) == record.Succeeded
}

// Start records that an attempt of u starts, and returns its number. The first
// attempt sets the unit's start time.
func (r *Run) Start(u *Unit) int {
	var n int
	r.Update(u, func(t *record.Task) {
		t.Attempts++
		n = t.Attempts
		if n == 1 {
			t.Start, t.End = r.now(), time.Time{}
		}
		t.State, t.ExitCode, t.Error, t.Reason, t.Stubbed = record.Running, nil, "", "", false
	})
	return n
}

// Begin records that an attempt of u starts, as Start does, tells it ("started",
// or which attempt of how many), and returns its number: for a runtime that
// starts each attempt itself.
func (r *Run) Begin(u *Unit) int {
	n := r.Start(u)
	if n == 1 {
		r.Disp.Event(u.Label, false, "started")
	} else {
		r.Disp.Event(u.Label, false, "%s started", AttemptOf(n, u.Step.Retry+1))
	}
	return n
}

// AttemptOf names attempt n of m: "attempt n of m". The events and the view
// name an attempt among the step's so, and a runtime's logs head each
// attempt's output with it.
func AttemptOf(n, m int) string {
	return fmt.Sprintf("attempt %d of %d", n, m)
}

// Seen records that attempt n of u runs, one the engine that runs u started
// itself and numbers itself, as try n of its own task task (Airflow's), and
// tells it. at is when the engine says the attempt started, zero when it does
// not say: the first attempt, or the first one seen, starts u then (now when
// at is zero), and its pending time ends there. A runtime that takes over a
// run sees the attempt its record left running as it is: u's count of
// attempts never goes back.
func (r *Run) Seen(u *Unit, n int, task string, at time.Time) {
	r.Update(u, func(t *record.Task) {
		k := max(n, t.Attempts, 1)
		if t.Start.IsZero() || k == 1 {
			t.Start, t.End = r.now(), time.Time{}
			if !at.IsZero() {
				// The engine's clock: the runtime may see the attempt late.
				t.Start = at.UTC()
			}
		}
		t.Attempts, t.State, t.ExitCode, t.Error, t.Reason = k, record.Running, nil, "", ""
	})
	if !at.IsZero() {
		r.Running(u, at)
	}
	r.Disp.Event(u.Label, false, "try %d of task %s running", n, task)
}

// Stub records that u succeeded without running: its step is stubbed (a
// rehearsal of the flow), and its program did not run.
func (r *Run) Stub(u *Unit) {
	now := r.now()
	r.Update(u, func(t *record.Task) {
		t.State, t.Start, t.End, t.Attempts, t.Stubbed = record.Succeeded, now, now, 0, true
		t.ExitCode, t.Error, t.Reason, t.Pods, t.Node = nil, "", "", nil, ""
	})
	r.Disp.Event(u.Label, false, "stubbed: its program did not run")
}

// stubbed returns the steps of which a unit is recorded stubbed, in flow
// order; callers hold r.mu.
func (r *Run) stubbed() []string {
	var steps []string
	for i := range r.Flow.Steps {
		name := r.Flow.Steps[i].Name
		if slices.ContainsFunc(r.steps[name], func(u *Unit) bool { return u.rec.Stubbed }) {
			steps = append(steps, name)
		}
	}
	return steps
}

// Running tells the run's trace that the attempt of u that runs now started
// running at (its process started, or its first pod ran): its pending time ends
// there.
func (r *Run) Running(u *Unit, at time.Time) {
	r.Trace.Running(u.Step, u.Index, at)
}

// TraceParent returns the W3C trace context a process of u's attempt that runs
// now continues (plan.EnvTraceParent), "" when the run is not traced.
func (r *Run) TraceParent(u *Unit) string {
	return r.Trace.AttemptParent(u.Step, u.Index)
}

// Succeed records that u succeeded, with what change adds to its record (nil for
// nothing), and tells how long it took.
func (r *Run) Succeed(u *Unit, change func(*record.Task)) {
	var rec record.Task
	r.Update(u, func(t *record.Task) {
		t.State, t.End = record.Succeeded, r.now()
		if change != nil {
			change(t)
		}
		rec = *t
	})
	r.Disp.Event(u.Label, false, "succeeded in %s", display.Human(rec.End.Sub(rec.Start)))
}

// Fail records that u failed for good: msg says why, reason is its short form
// ("" for none) and code the exit code when one is known.
func (r *Run) Fail(u *Unit, msg, reason string, code *int) {
	var rec record.Task
	r.Update(u, func(t *record.Task) {
		t.State, t.End, t.Error, t.Reason, t.ExitCode = record.Failed, r.now(), msg, reason, code
		rec = *t
	})
	r.Disp.Event(u.Label, true, "failed after %s: %s", display.Count(rec.Attempts, "attempt"), msg)
}

// ErrTimedOut is why an attempt that ran past its step's Timeout ended,
// wrapped by TimedOut.
var ErrTimedOut = errors.New("timed out")

// TimedOut is the error of an attempt stopped at its step's Timeout d.
func TimedOut(d time.Duration) error { return fmt.Errorf("%w after %s", ErrTimedOut, d) }

// Retry records that an attempt of u failed: msg says why and code is its exit
// code when one is known. While the step has retries left (sdk.Retry) u waits
// to retry, and Retry returns the delay before the next attempt (Backoff) and
// true; otherwise u failed for good (Fail) and Retry returns false.
func (r *Run) Retry(u *Unit, msg string, code *int) (time.Duration, bool) {
	n := r.Task(u).Attempts
	if n > u.Step.Retry {
		r.Fail(u, msg, "", code)
		return 0, false
	}
	r.Update(u, func(t *record.Task) { t.State, t.Error, t.ExitCode = record.Retrying, msg, code })
	delay := Backoff(u.Step.RetryBackoff, n)
	when := "retrying in " + display.Human(delay)
	if delay == 0 {
		when = "retrying"
	}
	r.Disp.Event(u.Label, true, "attempt %d failed: %s; %s", n, msg, when)
	return delay, true
}

// Retried records that attempt n of u failed, msg saying why, and that the
// engine that runs u retries it itself (a Job's backoffLimit, Airflow's
// retries), and tells it. next is the attempt the engine already runs, which
// becomes u's and is told with the step's count of attempts; 0 while the
// engine has yet to start it, u waiting to retry. The engine counts the
// attempts it may make and when it makes them (an Airflow task cleared counts
// its tries on), so a retry yet to start is told as Retry tells one without
// backoff.
func (r *Run) Retried(u *Unit, n int, msg string, next int) {
	if next == 0 {
		r.Update(u, func(t *record.Task) { t.State, t.Error = record.Retrying, msg })
		r.Disp.Event(u.Label, true, "attempt %d failed: %s; retrying", n, msg)
		return
	}
	r.Update(u, func(t *record.Task) { t.Attempts = next })
	r.Disp.Event(u.Label, true, "attempt %d failed: %s; retrying (%s)", n, msg, AttemptOf(next, u.Step.Retry+1))
}

// ErrCannotStart is wrapped by the error of an attempt whose program could not
// start (not found, not executable): another attempt would fail alike.
var ErrCannotStart = errors.New("cannot start")

// Failed records that an attempt of u failed with err, its exit code being
// code when one is known: Retry, but for an attempt whose program could not
// start (ErrCannotStart), which fails u at once, retries left or not.
func (r *Run) Failed(u *Unit, err error, code *int) (time.Duration, bool) {
	if errors.Is(err, ErrCannotStart) {
		r.Fail(u, err.Error(), "", code)
		return 0, false
	}
	return r.Retry(u, err.Error(), code)
}

// Backoff is the delay before the retry that follows attempt n of a step with
// RetryBackoff d: d, then doubling.
func Backoff(d time.Duration, n int) time.Duration {
	for i := 1; i < n && d > 0 && d < time.Hour*24*365; i++ {
		d *= 2
	}
	return d
}

// Interrupt records that u was stopped, or will not run again, because the run
// was interrupted; why says so ("interrupted" when empty).
func (r *Run) Interrupt(u *Unit, why string) {
	if why == "" {
		why = "interrupted"
	}
	r.Update(u, func(t *record.Task) { t.State, t.End, t.Error = record.Interrupted, r.now(), why })
	r.Disp.Event(u.Label, true, "interrupted")
}

// InterruptRetry records that u, waiting to retry (Retry), was interrupted
// before its next attempt: its error says so, and why its last attempt failed.
func (r *Run) InterruptRetry(u *Unit) {
	r.Interrupt(u, "interrupted while waiting to retry: "+r.Task(u).Error)
}

// Finish records how the run ended in its record and returns it; the error says
// why it did not succeed. interrupted says the run's context ended it: the run
// is interrupted when that stopped a unit or left one unstarted. Otherwise a
// failed unit fails the run (with detail adding to the first one's message, nil
// for nothing), and so does a state that could not be recorded or a unit that
// never started. A unit stopped without the run's context ending (its cluster
// stopped it) makes the run interrupted, never a success.
func (r *Run) Finish(interrupted bool, detail func(record.Task) string) (*Result, error) {
	res := &Result{ID: r.ID, Dir: r.Dir, State: record.Succeeded}
	var never, stopped []string
	why := ""
	r.mu.Lock()
	for _, u := range r.units {
		switch u.rec.State {
		case record.Interrupted:
			stopped = append(stopped, u.Label)
			if why == "" {
				why = u.rec.Error
			}
		case record.Pending:
			never = append(never, u.Label)
		case record.Failed:
			res.Failed = append(res.Failed, u.rec)
		case record.Skipped:
			if u.rec.Reason == NotTaken {
				break
			}
			if len(res.NotStarted) == 0 || res.NotStarted[len(res.NotStarted)-1] != u.rec.Step {
				res.NotStarted = append(res.NotStarted, u.rec.Step)
			}
		}
	}
	writeErr := r.writeErr
	// A step is recorded stubbed when one of its units was: a resume without
	// the stub runs it again (Changes).
	stubbed := r.stubbed()
	for i := range r.Rec.Steps {
		r.Rec.Steps[i].Stubbed = slices.Contains(stubbed, r.Rec.Steps[i].Name)
	}
	r.mu.Unlock()

	var err error
	switch {
	case interrupted && (len(stopped) > 0 || len(never) > 0):
		// (An interrupt that came after the last unit ended stopped nothing.)
		res.State = record.Interrupted
		err = fmt.Errorf("run %s %w; resume it with --run-id %s", r.ID, ErrInterrupted, r.ID)
	case len(res.Failed) > 0:
		res.State = record.Failed
		err = Failure(res.Failed, res.NotStarted, detail)
	case writeErr != nil:
		res.State = record.Failed
		err = fmt.Errorf("run %s: recording step state: %w", r.ID, writeErr)
	case len(never) > 0:
		// Every unit ends somehow unless the run is interrupted; one still
		// pending here must never pass for a success.
		res.State = record.Failed
		err = fmt.Errorf("run %s: %s never started", r.ID, strings.Join(never, ", "))
	case len(stopped) > 0:
		res.State = record.Interrupted
		err = fmt.Errorf("run %s %w: %s stopped (%s)", r.ID, ErrInterrupted, strings.Join(stopped, ", "), why)
	}
	r.Rec.State, r.Rec.End = res.State, r.now()
	if n := len(r.Rec.Spans); n > 0 {
		r.Rec.Spans[n-1].End = r.Rec.End
	}
	if err != nil {
		r.Rec.Error = err.Error()
	}
	if werr := record.WriteRecord(r.Dir, r.Rec); werr != nil && err == nil {
		res.State, err = record.Failed, fmt.Errorf("run %s: %w", r.ID, werr)
	}
	r.Trace.End(res.State, err)
	return res, err
}

// Ended tells how the run ended and how long it took, and that it was a
// rehearsal when steps were stubbed.
func (r *Run) Ended(state record.State) {
	rehearsal := ""
	if stubbed := r.Rec.Stubbed(); len(stubbed) > 0 {
		rehearsal = "; a rehearsal: " + strings.Join(stubbed, ", ") + " stubbed, their programs not run"
		if len(stubbed) == 1 {
			rehearsal = "; a rehearsal: " + stubbed[0] + " stubbed, its program not run"
		}
	}
	r.Disp.Note("run %s %s in %s%s", r.ID, state, display.Human(r.Rec.Took(r.Rec.End)), rehearsal)
}

// Failure says which steps failed, why the first did (with what detail adds to
// its record's error, nil for nothing), and which steps did not start. The steps
// not started follow on a line of their own when the reason takes several.
func Failure(failed []record.Task, notStarted []string, detail func(record.Task) string) error {
	labels := make([]string, len(failed))
	for i, t := range failed {
		labels[i] = t.Label()
	}
	first := failed[0]
	why := first.Error
	if detail != nil {
		why += detail(first)
	}
	msg := fmt.Sprintf("step %s failed: %s", labels[0], why)
	if len(labels) > 1 {
		msg = fmt.Sprintf("steps %s failed; %s: %s", strings.Join(labels, ", "), first.Label(), why)
	}
	if len(notStarted) > 0 {
		sep := "; "
		if strings.Contains(why, "\n") {
			sep = "\n"
		}
		msg += sep + "not started: " + strings.Join(notStarted, ", ")
	}
	return errors.New(msg)
}

// Digests returns the digests a run records of step s (record.StepInfo's Spec
// and Build): one of the step as compiled, but for its foreach items, which a
// resume compares one by one; and, for a Run step, build, the flow program's
// build (ProgramBuild), "" for other steps.
func Digests(s *plan.Step, build string) (spec, built string) {
	c := *s
	if c.Foreach != nil {
		c.Foreach = []string{}
	}
	// A plan is plain data, without a channel, function or cycle: it
	// always encodes.
	data, _ := json.Marshal(&c)
	sum := sha256.Sum256(data)
	if s.Body == plan.BodyRun {
		built = build
	}
	return hex.EncodeToString(sum[:16]), built
}

// StepInfo is what a run records of step s, with items foreach items (0 for
// a step whose items are not recorded one by one) and build, the flow
// program's build: its name, what it waits for, and its Digests.
func StepInfo(s *plan.Step, items int, build string) record.StepInfo {
	spec, built := Digests(s, build)
	return record.StepInfo{Name: s.Name, After: s.After, Items: items, FanOut: s.ForeachOf != nil, Spec: spec, Build: built}
}

// Resuming compares the steps run prev recorded with those this run records
// (Rec.Steps, set before) and sets Rerun (Changes). It returns what the run's
// display says of that, "" when nothing changed. Call it before Resume.
//
// The run keeps prev's start, and the time each runner ran it (Rec.Spans):
// prev's, and this runner's from Rec.Start, as set before. An earlier span
// without an end (its runner was killed) ends at the last time its units
// recorded, which Resume reads.
func (r *Run) Resuming(prev *record.Record) string {
	spans := slices.Clone(prev.Spans)
	if len(spans) == 0 {
		spans = []record.Span{{Start: prev.Start, End: prev.End}}
	}
	if last := &spans[len(spans)-1]; last.End.IsZero() {
		last.End, r.open = last.Start, len(spans)-1
	}
	r.Rec.Spans = append(spans, record.Span{Start: r.Rec.Start})
	r.Rec.Start = prev.Start
	var note string
	r.Rerun, note = Changes(r.ID, prev.Steps, r.Rec.Steps)
	return note
}

// Changes compares the steps a run id recorded, prev, with those a resume of
// it records, now (in flow order): each step whose spec or build differs, or
// that prev recorded without them, is to run again however it ended before,
// and so is every step that waits for one. It returns those steps, and what to
// say of them ("" when none changed).
func Changes(id string, prev, now []record.StepInfo) (map[string]bool, string) {
	was := map[string]record.StepInfo{}
	for _, s := range prev {
		was[s.Name] = s
	}
	var changed, again []string
	rerun := map[string]bool{}
	for _, s := range now {
		old, ok := was[s.Name]
		why := ""
		switch {
		case !ok:
			// A step new to the flow never ran.
		case old.Spec == "":
			why = "not recorded"
		case old.Spec != s.Spec:
			why = "spec"
		case old.Build != s.Build:
			why = "program build"
		case old.Stubbed && !s.Stubbed:
			why = "stubbed then"
		}
		if why != "" {
			changed = append(changed, s.Name+" ("+why+")")
		}
		if why != "" || slices.ContainsFunc(s.After, func(a string) bool { return rerun[a] }) {
			rerun[s.Name] = true
			again = append(again, s.Name)
		}
	}
	if len(changed) == 0 {
		return rerun, ""
	}
	return rerun, fmt.Sprintf("changed since run %s was recorded: %s; run again however they ended, with the steps that wait for them: %s",
		id, strings.Join(changed, ", "), strings.Join(again, ", "))
}

// ProgramBuild returns a digest of the flow program at path, the executable
// that runs the Run steps: it changes whenever the program is built anew with
// other code. It is read once per path, size and modification time.
func ProgramBuild(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("reading the flow program's build: %w", err)
	}
	key := fmt.Sprintf("%s\x00%d\x00%d", path, fi.Size(), fi.ModTime().UnixNano())
	if b, ok := builds.Load(key); ok {
		return b.(string), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading the flow program's build: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading the flow program's build: %w", err)
	}
	b := hex.EncodeToString(h.Sum(nil)[:16])
	builds.Store(key, b)
	return b, nil
}

// builds caches ProgramBuild by path, size and modification time.
var builds sync.Map
