// Package local runs a compiled flow on this machine.
//
// Steps start in dependency order, at most MaxParallel processes at a time. A Run
// step runs through the flow program itself (`<program> step NAME`), the contract
// a step's container uses, so a step cannot corrupt the runner; a Command step runs
// its argv as a process. Each gets the environment its pod would get (emit.Env:
// MANIFOLD_PARAM_*, MANIFOLD_ITEM and MANIFOLD_INDEX, the step's own variables,
// $(NAME) references expanded as the kubelet does) plus MANIFOLD_RUN_DIR and
// MANIFOLD_ARTIFACTS, and, when the run is traced (Options.Tracer), TRACEPARENT:
// the trace context of its attempt's span. A foreach step runs once per item;
// Retry, RetryBackoff and Timeout apply to each step as declared. A step that fails stops the steps that
// wait for it; independent steps finish.
//
// On Unix each step leads a process group of its own, and the whole group ends
// with the step: a timeout or an interrupt sends it SIGTERM, then SIGKILL after
// Options.KillGrace, and what a step leaves running when it exits is killed. On
// Linux a step's process also dies with a runner that is killed (SIGKILL, a
// crash), and resuming the run kills what its processes had started, found by
// the run directory in their environment, before any step runs again.
//
// A run keeps everything under <root>/<run id>/:
//
//	run.json                          the run: flow, params, steps, state, start and end
//	<step>/[<index>/]<name>.json      artifacts (sdk.Context.Put; MANIFOLD_ARTIFACTS)
//	_steps/<step>/[<index>/]          state.json, stdout.log and stderr.log of each step or item
//
// Running a run ID again resumes it: what succeeded is not run again, unless
// the step changed since (its compiled spec or, for a Run step, the program's
// build, which the record keeps for each step): a changed step runs again, with
// every step that waits for it, and the run says which changed.
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
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
	"github.com/manifoldflow/manifold/sdk"
)

// Options say where and how a flow runs.
type Options struct {
	// Root holds the runs; record.DefaultRoot when empty.
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
	// Tracer traces the run (package tracing), and gives each step's process
	// its attempt's trace context in TRACEPARENT; nil traces nothing.
	Tracer *tracing.Tracer
	// Stub names steps that do not run: each of their units succeeds at once
	// without running its program, and is recorded and shown stubbed (a
	// rehearsal of the flow, for example on a machine without a Command
	// step's program). A unit that succeeded for real in an earlier runner
	// of the run keeps that success.
	Stub []string
}

// DefaultKillGrace is the time a stopped step gets to exit before it is killed.
const DefaultKillGrace = 5 * time.Second

// Result is how a run ended.
type Result = dag.Result

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
var ErrInterrupted = dag.ErrInterrupted

// task is a unit of the run and what running it locally needs.
type task struct {
	*dag.Unit
	order int // position in the flow, for starting tasks in flow order
	// artifacts and stateDir are the task's directories in the run.
	artifacts, stateDir string
	timer               *time.Timer
}

type runner struct {
	*dag.Run
	o      Options
	tasks  []*task
	byUnit map[*dag.Unit]*task
	// stubbed holds the steps that do not run (Options.Stub).
	stubbed map[string]bool
}

// Run runs f and returns how the run ended. The error is nil only when every step
// succeeded; with a Result it says which steps failed, or that ctx interrupted the
// run (ErrInterrupted), in which case every process was stopped and the run is
// recorded as interrupted. Without a Result nothing ran.
func Run(ctx context.Context, f *plan.Flow, o Options) (*Result, error) {
	o, err := withDefaults(o)
	if err != nil {
		return nil, err
	}
	notes, refused := Ignored(f)
	if o.Strict && len(refused) > 0 {
		return nil, &RefusedError{Problems: refused}
	}
	stubbed, err := stubSet(f, o.Stub)
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	id, err := runid.Choose(o.RunID, now)
	if err != nil {
		return nil, err
	}
	params := flowParams(f)
	if err := precheck(f, filepath.Join(root, id), params, stubbed); err != nil {
		return nil, err
	}
	dir, lk, err := record.Open(root, id)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	r := &runner{Run: dag.New(f, id, dir), o: o, byUnit: map[*dag.Unit]*task{}, stubbed: stubbed}
	r.Rec = record.Record{Flow: f.Name, ID: id, State: record.Running, Start: now.UTC(), PID: os.Getpid(), Params: params}
	resumed, found, err := r.prepare(f, dir, params)
	if err != nil {
		return nil, err
	}
	r.show(f, dir, resumed, append(notes, found...))
	r.Trace = o.Tracer.Begin(f, id, "local")
	r.Disp.Start()
	r.loop(ctx)
	res, err := r.Finish(ctx.Err() != nil, func(t record.Task) string { return logOf(t.Dir(dir)) })
	r.Disp.Stop()
	r.Ended(res.State)
	return res, err
}

// withDefaults fills in what o leaves empty: the root, parallelism, kill grace,
// writers and the flow program.
func withDefaults(o Options) (Options, error) {
	if o.Root == "" {
		o.Root = record.DefaultRoot
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
			return o, fmt.Errorf("finding the flow program for its Run steps: %w", err)
		}
		o.Program = exe
	}
	if o.Arg0 == "" {
		o.Arg0 = o.Program
	}
	return o, nil
}

// stubSet checks that flow f has each step to stub and returns them as a set.
func stubSet(f *plan.Flow, steps []string) (map[string]bool, error) {
	stubbed := map[string]bool{}
	for _, step := range steps {
		if err := CheckStub(f, step); err != nil {
			return nil, fmt.Errorf("stub %s: %w", step, err)
		}
		stubbed[step] = true
	}
	return stubbed, nil
}

// flowParams returns the values of flow f's params by name.
func flowParams(f *plan.Flow) map[string]string {
	params := map[string]string{}
	for _, p := range f.Params {
		params[p.Name] = p.Value
	}
	return params
}

// precheck refuses a run before its directory dir is opened: a run ID of
// another flow or other params, or a step's program this machine lacks.
func precheck(f *plan.Flow, dir string, params map[string]string, stubbed map[string]bool) error {
	// A program this machine lacks is known before anything runs (but that
	// the run ID is another flow's, or was made with other params).
	if prev, err := record.ReadRecord(dir); err == nil {
		if err := record.Resumable(prev, f.Name, params); err != nil {
			return err
		}
	}
	return lacking(f, dir, stubbed)
}

// prepare reads what an earlier runner of the run in dir recorded, records
// flow f's steps, adds their tasks and writes the record. It says whether the
// run resumes, with notes on what it found: processes an earlier runner left
// running, and steps that changed since.
func (r *runner) prepare(f *plan.Flow, dir string, params map[string]string) (resumed bool, notes []string, err error) {
	prev, err := record.ReadRecord(dir)
	resumed = err == nil
	switch {
	case resumed:
		if err := record.Resumable(prev, f.Name, params); err != nil {
			return false, nil, err
		}
		// What a killed runner's steps started may still run; it must not
		// run beside the steps run again.
		if orphans := stopOrphans(dir); len(orphans) > 0 {
			notes = append(notes, "stopped "+display.Count(len(orphans), "process")+" that an earlier runner of this run left running")
		}
	case !errors.Is(err, fs.ErrNotExist):
		return false, nil, fmt.Errorf("run %s: %w", r.Rec.ID, err)
	}
	if err := r.recordSteps(f); err != nil {
		return false, nil, err
	}
	if resumed {
		if note := r.Resuming(prev); note != "" {
			notes = append(notes, note)
		}
	}
	r.Dynamic = dag.Dynamic{Store: artifact.Dir(dir), Made: func(us []*dag.Unit) error { return r.makeTasks(us, resumed) }}
	for i := range f.Steps {
		if err := r.addTasks(&f.Steps[i], resumed); err != nil {
			return false, nil, err
		}
	}
	if err := record.WriteRecord(dir, r.Rec); err != nil {
		return false, nil, err
	}
	return resumed, notes, nil
}

// recordSteps adds each step of flow f to the run's record, with the build of
// the flow program when a step runs through it.
func (r *runner) recordSteps(f *plan.Flow) error {
	build := ""
	if slices.ContainsFunc(f.Steps, func(s plan.Step) bool { return s.Body == plan.BodyRun }) {
		var err error
		if build, err = dag.ProgramBuild(r.o.Program); err != nil {
			return err
		}
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		info := dag.StepInfo(s, len(s.Foreach), build)
		info.Stubbed = r.stubbed[s.Name]
		r.Rec.Steps = append(r.Rec.Steps, info)
	}
	return nil
}

// show sets up the run's display of its tasks and notes how the run starts:
// its ID, steps and directory dir, then notes and the stubbed steps.
func (r *runner) show(f *plan.Flow, dir string, resumed bool, notes []string) {
	labels := make([]string, len(r.tasks))
	for i, t := range r.tasks {
		labels[i] = t.Label
	}
	o := r.o
	r.Disp = display.New(display.Options{
		Stdout: o.Stdout, Stderr: o.Stderr, Live: o.Live, Width: o.Width, Height: o.Height,
		Labels: labels, View: r.StepView, StateColumn: 1,
	})
	verb := "run"
	if resumed {
		verb = "resuming run"
	}
	r.Disp.Note("%s %s of flow %s: %s, at most %d at a time, in %s", verb, r.Rec.ID, f.Name, display.Count(len(f.Steps), "step"), o.MaxParallel, display.Rel(dir))
	for _, n := range notes {
		r.Disp.Note("%s", n)
	}
	if len(r.stubbed) > 0 {
		var names []string
		for i := range f.Steps {
			if r.stubbed[f.Steps[i].Name] {
				names = append(names, f.Steps[i].Name)
			}
		}
		r.Disp.Note("stubbed, their programs not run (a rehearsal, not a real run): %s", strings.Join(names, ", "))
	}
}

// CheckStub returns nil when flow f has the step to stub, else an error that
// names the steps it has.
func CheckStub(f *plan.Flow, step string) error {
	names := make([]string, len(f.Steps))
	for i := range f.Steps {
		if f.Steps[i].Name == step {
			return nil
		}
		names[i] = f.Steps[i].Name
	}
	return fmt.Errorf("flow %s has no step %q%s; its steps are %s", f.Name, step, suggest.DidYouMean(step, names), strings.Join(names, ", "))
}

// addTasks makes the tasks of step s: one, or one per foreach item. When resuming,
// what succeeded before (for the same item) is kept.
func (r *runner) addTasks(s *plan.Step, resumed bool) error {
	us := dag.Units(s)
	if err := r.makeTasks(us, resumed); err != nil {
		return err
	}
	r.Add(us...)
	return nil
}

// makeTasks makes the tasks of units us, before they are added to the run:
// those of a step, or of a fan-out made at run time. When resuming, what
// succeeded before (for the same item) is kept.
func (r *runner) makeTasks(us []*dag.Unit, resumed bool) error {
	for _, u := range us {
		t := newTask(r.Dir, u)
		t.order = len(r.tasks)
		if resumed {
			if err := r.Resume(t.Unit); err != nil {
				return err
			}
		}
		r.tasks = append(r.tasks, t)
		r.byUnit[t.Unit] = t
	}
	return nil
}

// newTask is unit u of the run kept in dir, with where its artifacts and its
// state go.
func newTask(dir string, u *dag.Unit) *task {
	return &task{Unit: u, artifacts: sdk.ArtifactDir(dir, u.Step.Name, u.Index), stateDir: record.StateDir(dir, u.Step.Name, u.Index)}
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
	running, waiting := 0, 0
	// stop is ctx.Done() until the run is interrupted, then nil. (It is nil from
	// the start for a context that cannot end.)
	stop, interrupted := ctx.Done(), false
	for {
		if !interrupted {
			for ready := r.Release(); len(ready) > 0; ready = r.Release() {
				stubbed := false
				for _, u := range ready {
					if r.stubbed[u.Step.Name] {
						// A stubbed unit succeeds at once; what waits for it
						// may be ready now.
						r.Stub(u)
						stubbed = true
						continue
					}
					queue = append(queue, r.byUnit[u])
				}
				if !stubbed {
					break
				}
			}
			for running < r.o.MaxParallel && len(queue) > 0 {
				t := queue[0]
				queue = queue[1:]
				running++
				n := r.Begin(t.Unit)
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
					r.InterruptRetry(ev.t.Unit)
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
					r.InterruptRetry(t.Unit)
				}
			}
		}
	}
}

// ended records how an attempt of t ended, and says whether to retry, after what
// delay.
func (r *runner) ended(ctx context.Context, t *task, o outcome) (time.Duration, bool) {
	code := func(x *record.Task) { x.ExitCode = o.exitCode }
	switch {
	case o.err == nil:
		r.Succeed(t.Unit, code)
		return 0, false
	case ctx.Err() != nil && !errors.Is(o.err, dag.ErrTimedOut):
		r.Amend(t.Unit, code)
		r.Interrupt(t.Unit, "")
		return 0, false
	}
	return r.Failed(t.Unit, o.failure(), o.exitCode)
}

// logOf is what the error of a failed task says of its log, in state directory
// dir: " (log: PATH)" of its stderr.log, or of its stdout.log when it wrote
// nothing to stderr; "" when it wrote nothing (a log is made at its first
// write), or never started.
func logOf(dir string) string {
	for _, name := range []string{record.StderrLog, record.StdoutLog} {
		path := filepath.Join(dir, name)
		if info, err := os.Stat(path); err == nil && info.Size() > 0 {
			return fmt.Sprintf(" (log: %s)", display.Rel(path))
		}
	}
	return ""
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
