// Package local runs a compiled flow on this machine.
//
// Steps start in dependency order, at most MaxParallel processes at a time. A Run
// step runs through the flow program itself (`<program> step NAME`), the contract
// a step's container uses, so a step cannot corrupt the runner; a Command step runs
// its argv as a process. Each gets the environment its pod would get (emit.Env:
// MANIFOLD_PARAM_*, MANIFOLD_ITEM and MANIFOLD_INDEX, the step's own variables,
// $(NAME) references expanded as the kubelet does) plus MANIFOLD_RUN_DIR and
// MANIFOLD_ARTIFACTS. A foreach step runs once per item; Retry, RetryBackoff and
// Timeout apply to each step as declared. A step that fails stops the steps that
// wait for it; independent steps finish.
//
// On Unix each step leads a process group of its own, and the whole group ends
// with the step: a timeout or an interrupt sends it SIGTERM, then SIGKILL after
// Options.KillGrace, and what a step leaves running when it exits is killed.
//
// A run keeps everything under <root>/<run id>/:
//
//	run.json                          the run: flow, params, steps, state, start and end
//	<step>/[<index>/]<name>.json      artifacts (sdk.Context.Put; MANIFOLD_ARTIFACTS)
//	_steps/<step>/[<index>/]          state.json, stdout.log and stderr.log of each step or item
//
// Running a run ID again resumes it: what succeeded is not run again.
//
// Accelerator requests (Neuron, EFA, GPUs, other extended resources) are reported
// once and ignored, or refused with Options.Strict. Images, CPU and memory,
// placement and volumes do not apply here: a Command step runs on this machine.
package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// Options say where and how a flow runs.
type Options struct {
	// Root holds the runs; DefaultRoot when empty.
	Root string
	// RunID resumes that run when it exists, or names a new one; a new run gets a
	// fresh ID (runid.New) when it is empty.
	RunID string
	// MaxParallel bounds the processes running at once; runtime.NumCPU() when 0
	// or less.
	MaxParallel int
	// Strict refuses a flow that asks for accelerators instead of ignoring them.
	Strict bool
	// Program is the flow program that runs Run steps (os.Executable()), and Arg0
	// what it is told its name is (os.Args[0]).
	Program, Arg0 string
	// Stdout receives progress and the steps' standard output, Stderr their
	// standard error; io.Discard when nil.
	Stdout, Stderr io.Writer
	// Live redraws one line per step in place on Stdout, a terminal Width columns
	// wide and Height lines high (when there are more steps than lines, it shows
	// those running or failed, and counts the others); otherwise every event is a
	// timestamped line.
	Live          bool
	Width, Height int
	// KillGrace is how long a stopped step has between SIGTERM and SIGKILL; 5s
	// when 0.
	KillGrace time.Duration
}

// DefaultKillGrace is the time a stopped step gets to exit before it is killed.
const DefaultKillGrace = 5 * time.Second

// Result is how a run ended.
type Result struct {
	ID string
	// Dir is the run directory.
	Dir   string
	State State
	// Failed holds the steps and items that failed, in flow order.
	Failed []Task
	// NotStarted names the steps skipped because a step they wait for failed.
	NotStarted []string
}

// RefusedError lists what a flow asks that a strict local run refuses.
type RefusedError struct{ Problems field.ErrorList }

// Error lists the problems, one per line.
func (e *RefusedError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Error()
	}
	return strings.Join(msgs, "\n")
}

// ErrInterrupted is what Run returns, wrapped, when its context ends the run.
var ErrInterrupted = errors.New("interrupted")

type task struct {
	step  *plan.Step
	index int // -1 for a step without Foreach
	order int // position in the flow, for starting tasks in flow order
	label string
	// artifacts and stateDir are the task's directories in the run.
	artifacts, stateDir string
	// rec is guarded by runner.mu.
	rec Task
	// earlier is set when an earlier runner of this run already succeeded.
	earlier bool
	timer   *time.Timer
}

type runner struct {
	flow *plan.Flow
	o    Options
	id   string
	dir  string
	disp *display.Display

	mu    sync.Mutex
	rec   Record
	tasks []*task
	steps map[string][]*task
	// writeErr is the first failure to record state.
	writeErr error
}

// Run runs f and returns how the run ended. The error is nil only when every step
// succeeded; with a Result it says which steps failed, or that ctx interrupted the
// run (ErrInterrupted), in which case every process was stopped and the run is
// recorded as interrupted. Without a Result nothing ran.
func Run(ctx context.Context, f *plan.Flow, o Options) (*Result, error) {
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = runtime.NumCPU()
	}
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Program == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding the flow program for its Run steps: %w", err)
		}
		o.Program = exe
	}
	if o.Arg0 == "" {
		o.Arg0 = o.Program
	}
	notes, refused := Ignored(f)
	if o.Strict && len(refused) > 0 {
		return nil, &RefusedError{Problems: refused}
	}

	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	id := o.RunID
	if id == "" {
		id = runid.New(now)
	} else if err := runid.Check(id); err != nil {
		return nil, err
	}
	dir, lk, err := record.Open(root, id)
	if err != nil {
		return nil, err
	}
	r := &runner{flow: f, o: o, id: id, dir: dir, steps: map[string][]*task{}}
	defer lk.Close()

	params := map[string]string{}
	for _, p := range f.Params {
		params[p.Name] = p.Value
	}
	r.rec = Record{Flow: f.Name, ID: id, State: Running, Start: now.UTC(), PID: os.Getpid(), Params: params}
	prev, err := record.ReadRecord(r.dir)
	resumed := err == nil
	switch {
	case resumed:
		if err := record.Resumable(prev, f.Name, params); err != nil {
			return nil, err
		}
		r.rec.Start = prev.Start
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		r.rec.Steps = append(r.rec.Steps, StepInfo{Name: s.Name, After: s.After, Items: len(s.Foreach)})
		if err := r.addTasks(s, resumed); err != nil {
			return nil, err
		}
	}
	if err := record.WriteRecord(r.dir, r.rec); err != nil {
		return nil, err
	}

	r.disp = newDisplay(r)
	verb := "run"
	if resumed {
		verb = "resuming run"
	}
	r.disp.Note("%s %s of flow %s: %d steps, at most %d at a time, in %s", verb, id, f.Name, len(f.Steps), o.MaxParallel, r.relDir())
	for _, n := range notes {
		r.disp.Note("%s", n)
	}
	r.disp.Start()
	r.loop(ctx)
	return r.finish(ctx)
}

// addTasks makes the tasks of step s: one, or one per foreach item. When resuming,
// what succeeded before (for the same item) is kept.
func (r *runner) addTasks(s *plan.Step, resumed bool) error {
	n := max(len(s.Foreach), 1)
	for i := range n {
		t := &task{step: s, index: -1, order: len(r.tasks)}
		if s.Foreach != nil {
			t.index = i
		}
		t.artifacts = sdk.ArtifactDir(r.dir, s.Name, t.index)
		t.stateDir = StateDir(r.dir, s.Name, t.index)
		t.rec = Task{Step: s.Name, State: Pending}
		if t.index >= 0 {
			t.rec.Index, t.rec.Item = new(t.index), s.Foreach[t.index]
		}
		t.label = t.rec.Label()
		if resumed {
			prev, err := record.ReadTask(r.dir, s.Name, t.index)
			if err != nil {
				return err
			}
			if prev.State == Succeeded && prev.Item == t.rec.Item {
				t.rec, t.earlier = prev, true
			}
		}
		if resumed && !t.earlier {
			// What an earlier runner recorded of a task that runs again is stale. (A
			// task without state.json reads as pending.)
			if _, err := os.Stat(filepath.Join(t.stateDir, record.StateFile)); err == nil {
				if err := record.WriteTask(r.dir, t.rec); err != nil {
					return err
				}
			}
		}
		r.tasks = append(r.tasks, t)
		r.steps[s.Name] = append(r.steps[s.Name], t)
	}
	return nil
}

// event is an attempt that ended, or a retry whose backoff is over.
type event struct {
	t     *task
	out   outcome
	retry bool
}

// loop starts tasks as the steps they wait for succeed, at most MaxParallel at a
// time, until none is left to start or ctx ends the run.
func (r *runner) loop(ctx context.Context) {
	events := make(chan event, len(r.tasks))
	var queue []*task
	released := map[string]bool{}
	running, waiting := 0, 0
	// stop is ctx.Done() until the run is interrupted, then nil. (It is nil from
	// the start for a context that cannot end.)
	stop, interrupted := ctx.Done(), false
	for {
		if !interrupted {
			queue = r.release(queue, released)
			for running < r.o.MaxParallel && len(queue) > 0 {
				t := queue[0]
				queue = queue[1:]
				running++
				n := r.begin(t)
				go func() { events <- event{t: t, out: r.attempt(ctx, t, n)} }()
			}
		}
		if running == 0 && waiting == 0 && (interrupted || len(queue) == 0) {
			return
		}
		select {
		case ev := <-events:
			if ev.retry {
				waiting--
				if interrupted {
					r.interrupt(ev.t)
					continue
				}
				queue = append(queue, ev.t)
				sort.Slice(queue, func(i, j int) bool { return queue[i].order < queue[j].order })
				continue
			}
			running--
			if delay, retry := r.ended(ctx, ev.t, ev.out); retry {
				waiting++
				t := ev.t
				t.timer = time.AfterFunc(delay, func() { events <- event{t: t, retry: true} })
			}
		case <-stop:
			stop, interrupted = nil, true
			for _, t := range r.tasks {
				if t.timer != nil && t.timer.Stop() {
					t.timer = nil
					waiting--
					r.interrupt(t)
				}
			}
		}
	}
}

// release queues the tasks of every step whose dependencies all succeeded, and
// skips the steps that wait for a step that failed or was skipped.
func (r *runner) release(queue []*task, released map[string]bool) []*task {
	for i := range r.flow.Steps {
		s := &r.flow.Steps[i]
		if released[s.Name] {
			continue
		}
		ready, blocker := true, ""
		for _, a := range s.After {
			switch st := r.stepState(a); {
			case st == Succeeded:
			case st == Failed || st == Skipped:
				ready, blocker = false, a+" "+string(st)
			default:
				ready = false
			}
			if blocker != "" {
				break
			}
		}
		switch {
		case blocker != "":
			released[s.Name] = true
			for _, t := range r.steps[s.Name] {
				if t.earlier {
					continue
				}
				r.update(t, func(rec *Task) {
					rec.State, rec.Error = Skipped, "not started: "+blocker
				})
				r.disp.Event(t.label, true, "not started: %s", blocker)
			}
		case ready:
			released[s.Name] = true
			for _, t := range r.steps[s.Name] {
				if t.earlier {
					r.disp.Event(t.label, false, "succeeded in an earlier attempt of this run: not run again")
					continue
				}
				queue = append(queue, t)
			}
		}
	}
	return queue
}

// stepState sums up the state of a step's tasks.
func (r *runner) stepState(step string) State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return summary(r.steps[step])
}

// summary is the state of a step from its tasks': running while any runs or waits
// to retry, else failed if any failed, and so on; succeeded when all did. Callers
// hold runner.mu.
func summary(ts []*task) State {
	var running, retrying, final, failed, interrupted, skipped int
	for _, t := range ts {
		switch st := t.rec.State; st {
		case Running:
			running++
		case Retrying:
			retrying++
		case Failed:
			failed++
		case Interrupted:
			interrupted++
		case Skipped:
			skipped++
		}
		if t.rec.State.Final() {
			final++
		}
	}
	switch {
	case running > 0:
		return Running
	case retrying > 0:
		return Retrying
	case final < len(ts) && final > 0:
		return Running // some items done, others queued
	case final < len(ts):
		return Pending
	case failed > 0:
		return Failed
	case interrupted > 0:
		return Interrupted
	case skipped > 0:
		return Skipped
	}
	return Succeeded
}

// begin marks t running and returns the number of its attempt.
func (r *runner) begin(t *task) int {
	var n int
	r.update(t, func(rec *Task) {
		rec.Attempts++
		n = rec.Attempts
		if n == 1 {
			rec.Start, rec.End = time.Now().UTC(), time.Time{}
		}
		rec.State, rec.ExitCode, rec.Error = Running, nil, ""
	})
	if n == 1 {
		r.disp.Event(t.label, false, "started")
	} else {
		r.disp.Event(t.label, false, "attempt %d of %d started", n, t.step.Retry+1)
	}
	return n
}

// ended records how an attempt of t ended, and says whether to retry, after what
// delay.
func (r *runner) ended(ctx context.Context, t *task, o outcome) (time.Duration, bool) {
	var rec Task
	r.update(t, func(x *Task) {
		x.ExitCode = o.exitCode
		switch {
		case o.err == nil:
			x.State, x.End = Succeeded, time.Now().UTC()
		case ctx.Err() != nil && !errors.Is(o.err, errTimeout):
			x.State, x.End, x.Error = Interrupted, time.Now().UTC(), "interrupted"
		default:
			x.Error = o.err.Error()
			if o.lastErr != "" {
				x.Error += ": " + clip(o.lastErr, 300)
			}
			x.State = Failed
			if x.Attempts <= t.step.Retry {
				x.State = Retrying
			} else {
				x.End = time.Now().UTC()
			}
		}
		rec = *x
	})
	switch rec.State {
	case Succeeded:
		r.disp.Event(t.label, false, "succeeded in %s", display.Human(rec.End.Sub(rec.Start)))
	case Interrupted:
		r.disp.Event(t.label, true, "interrupted")
	case Failed:
		r.disp.Event(t.label, true, "failed after %s: %s", count(rec.Attempts, "attempt"), rec.Error)
	case Retrying:
		delay := backoff(t.step.RetryBackoff, rec.Attempts)
		when := "retrying in " + display.Human(delay)
		if delay == 0 {
			when = "retrying"
		}
		r.disp.Event(t.label, true, "attempt %d failed: %s; %s", rec.Attempts, rec.Error, when)
		return delay, true
	}
	return 0, false
}

// interrupt records that t, waiting to retry, will not run again.
func (r *runner) interrupt(t *task) {
	r.update(t, func(rec *Task) {
		rec.State, rec.End, rec.Error = Interrupted, time.Now().UTC(), "interrupted while waiting to retry: "+rec.Error
	})
	r.disp.Event(t.label, true, "interrupted")
}

// backoff is the delay before the retry that follows attempt n: d, then doubling.
func backoff(d time.Duration, n int) time.Duration {
	for i := 1; i < n && d > 0 && d < time.Hour*24*365; i++ {
		d *= 2
	}
	return d
}

// update changes t's record under the lock and writes its state.json. Only the
// scheduling loop calls it.
func (r *runner) update(t *task, change func(*Task)) {
	r.mu.Lock()
	change(&t.rec)
	rec := t.rec
	r.mu.Unlock()
	if err := record.WriteTask(r.dir, rec); err != nil {
		r.mu.Lock()
		if r.writeErr == nil {
			r.writeErr = err
		}
		r.mu.Unlock()
	}
}

// finish records how the run ended and reports it.
func (r *runner) finish(ctx context.Context) (*Result, error) {
	res := &Result{ID: r.id, Dir: r.dir, State: Succeeded}
	var never []string
	stopped := false
	r.mu.Lock()
	for _, t := range r.tasks {
		switch t.rec.State {
		case Interrupted:
			stopped = true
		case Pending:
			never = append(never, t.label)
		case Failed:
			res.Failed = append(res.Failed, t.rec)
		case Skipped:
			if !slices.Contains(res.NotStarted, t.rec.Step) {
				res.NotStarted = append(res.NotStarted, t.rec.Step)
			}
		}
	}
	writeErr := r.writeErr
	r.mu.Unlock()

	var err error
	switch {
	case ctx.Err() != nil && (stopped || len(never) > 0):
		// (An interrupt that came after the last step ended stopped nothing.)
		res.State = Interrupted
		err = fmt.Errorf("run %s %w; resume it with --run-id %s", r.id, ErrInterrupted, r.id)
	case len(res.Failed) > 0:
		res.State = Failed
		err = r.failure(res)
	case writeErr != nil:
		res.State = Failed
		err = fmt.Errorf("run %s: recording step state: %w", r.id, writeErr)
	case len(never) > 0:
		// Every step ends somehow unless the run is interrupted; a step still
		// pending here must never pass for a success.
		res.State = Failed
		err = fmt.Errorf("run %s: %s never started", r.id, strings.Join(never, ", "))
	}
	r.rec.State, r.rec.End = res.State, time.Now().UTC()
	if err != nil {
		r.rec.Error = err.Error()
	}
	if werr := record.WriteRecord(r.dir, r.rec); werr != nil && err == nil {
		res.State, err = Failed, fmt.Errorf("run %s: %w", r.id, werr)
	}
	r.disp.Stop()
	r.disp.Note("run %s %s in %s", r.id, res.State, display.Human(r.rec.End.Sub(r.rec.Start)))
	return res, err
}

// failure says which steps failed, why, where their logs are and what did not run.
func (r *runner) failure(res *Result) error {
	var labels []string
	for _, t := range res.Failed {
		labels = append(labels, t.Label())
	}
	first := res.Failed[0]
	index := -1
	if first.Index != nil {
		index = *first.Index
	}
	noun := "step"
	if len(labels) > 1 {
		noun = "steps"
	}
	msg := fmt.Sprintf("%s %s failed: ", noun, strings.Join(labels, ", "))
	if len(labels) > 1 {
		msg = fmt.Sprintf("%s %s failed; %s: ", noun, strings.Join(labels, ", "), first.Label())
	}
	msg += fmt.Sprintf("%s (log: %s)", first.Error, r.rel(filepath.Join(StateDir(r.dir, first.Step, index), StderrLog)))
	if len(res.NotStarted) > 0 {
		msg += "; not started: " + strings.Join(res.NotStarted, ", ")
	}
	return errors.New(msg)
}

// relDir returns the run directory relative to the working directory when it is
// below it, for shorter messages.
func (r *runner) relDir() string { return r.rel(r.dir) }

func (r *runner) rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
