package flowtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// RunID is the ID of every run flowtest makes, in a directory of its own.
const RunID = "test"

// runner runs one flow on a fake clock. Units ready at the same time start in
// flow order; each attempt runs to its end when it starts, and how it ended is
// told when the clock reaches its end.
type runner struct {
	*dag.Run
	ctx    context.Context
	stubs  map[string][]Action
	exec   map[string]bool
	bodies map[string]func(*sdk.Context) error
	params map[string]string
	spec   *sdk.FlowSpec

	clock time.Time
	// due are the attempts that end, and the retries that start, later.
	due []due
	seq int
	res *Result
}

// due is an attempt that ends at a time (retry false), or a unit whose
// backoff ends then (retry true).
type due struct {
	at    time.Time
	seq   int
	u     *dag.Unit
	retry bool
	code  *int
	err   error
}

// run runs f and returns its Result; the error says the run could not start.
func run(ctx context.Context, t testing.TB, f *plan.Flow, stubs map[string][]Action, exec map[string]bool, bodies map[string]func(*sdk.Context) error, spec *sdk.FlowSpec) (*Result, error) {
	dir, lk, err := record.Open(t.TempDir(), RunID)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	r := &runner{Run: dag.New(f, RunID, dir), ctx: ctx, stubs: stubs, exec: exec, bodies: bodies, spec: spec,
		params: map[string]string{}, clock: time.Now().UTC().Truncate(time.Second)}
	r.Now = func() time.Time { return r.clock }
	r.res = &Result{flow: f.Name, dir: dir, units: map[string]*unit{}}
	for _, p := range f.Params {
		r.params[p.Name] = p.Value
	}
	start := r.clock
	r.Rec = record.Record{Flow: f.Name, ID: RunID, State: record.Running, Start: start, PID: os.Getpid(), Params: r.params}
	var labels []string
	for i := range f.Steps {
		s := &f.Steps[i]
		r.Rec.Steps = append(r.Rec.Steps, record.StepInfo{Name: s.Name, After: s.After, Items: len(s.Foreach), FanOut: s.ForeachOf != nil})
		us := dag.Units(s)
		r.made(us)
		r.Add(us...)
		for _, u := range us {
			labels = append(labels, u.Label)
		}
	}
	r.Dynamic = dag.Dynamic{Store: artifact.Dir(dir), Made: func(us []*dag.Unit) error { r.made(us); return nil }}
	if err := record.WriteRecord(dir, r.Rec); err != nil {
		return nil, err
	}
	r.Disp = display.New(display.Options{Stdout: t.Output(), Stderr: t.Output(), Labels: labels,
		View: r.StepView, StateColumn: 1, Now: r.Now})
	r.Disp.Note("run %s of flow %s: %s, on a fake clock, in %s", RunID, f.Name, display.Count(len(f.Steps), "step"), dir)

	r.loop()
	_, err = r.Finish(false, nil)
	r.Ended(r.Rec.State)
	r.res.err, r.res.elapsed = err, r.clock.Sub(start)
	r.res.table = r.table()
	for _, label := range r.res.order {
		ru := r.res.units[label]
		ru.rec = r.Task(ru.u)
	}
	return r.res, nil
}

// made keeps the units us of the run in its result, in flow order.
func (r *runner) made(us []*dag.Unit) {
	for _, u := range us {
		r.res.order = append(r.res.order, u.Label)
		r.res.units[u.Label] = &unit{u: u, first: -1, last: -1}
	}
}

// loop starts what is ready, then moves the clock to the next attempt that
// ends or retry that starts, until nothing is left.
func (r *runner) loop() {
	for {
		for _, u := range r.Release() {
			r.begin(u)
		}
		if len(r.due) == 0 {
			return
		}
		i := 0
		for j, d := range r.due {
			if d.at.Before(r.due[i].at) || d.at.Equal(r.due[i].at) && d.seq < r.due[i].seq {
				i = j
			}
		}
		d := r.due[i]
		r.due = slices.Delete(r.due, i, i+1)
		r.clock = d.at
		if d.retry {
			r.begin(d.u)
			continue
		}
		r.ended(d)
	}
}

// after schedules d to happen after delay.
func (r *runner) after(delay time.Duration, d due) {
	r.seq++
	d.at, d.seq = r.clock.Add(delay), r.seq
	r.due = append(r.due, d)
}

// begin starts attempt n of u: it runs it to its end now, and schedules that
// end at the time the attempt took.
func (r *runner) begin(u *dag.Unit) {
	n := r.Begin(u)
	ru := r.res.units[u.Label]
	r.seq++
	if ru.first < 0 {
		ru.first = r.seq
		r.res.started = append(r.res.started, u.Label)
	}
	took, code, err := r.attempt(u, n)
	r.after(took, due{u: u, code: code, err: err})
}

// ended records how an attempt ended, and schedules its retry.
func (r *runner) ended(d due) {
	ru := r.res.units[d.u.Label]
	ru.err = d.err
	if d.err == nil {
		r.Succeed(d.u, func(t *record.Task) { t.ExitCode = d.code })
	} else if delay, again := r.Failed(d.u, d.err, d.code); again {
		r.after(delay, due{u: d.u, retry: true})
		return
	}
	r.seq++
	ru.last = r.seq
}

// attempt runs attempt n of u and returns how long it took on the fake clock,
// its exit code (nil for a Go function run in this process) and its error.
func (r *runner) attempt(u *dag.Unit, n int) (time.Duration, *int, error) {
	if actions, ok := r.stubs[u.Step.Name]; ok {
		return r.stub(u, n, actions)
	}
	if r.exec[u.Step.Name] {
		began := time.Now()
		code, err := local.Attempt(r.ctx, r.Run, u, n, local.Options{})
		return time.Since(began), code, err
	}
	ctx := sdk.NewContext(r.ctx, r.contextConfig(u))
	return 0, nil, sdk.Invoke(r.bodies[u.Step.Name], ctx)
}

// contextConfig is what a step's sdk.Context is made of in this run.
func (r *runner) contextConfig(u *dag.Unit) sdk.ContextConfig {
	c := sdk.ContextConfig{Flow: r.Flow.Name, Step: u.Step.Name, Params: r.params, Index: u.Index, Store: artifact.Dir(r.Dir), Spec: r.spec}
	if u.Index >= 0 {
		c.Item, c.ItemJSON, c.Count = u.Item, u.ItemJSON, r.Count(u)
	}
	return c
}

// stub runs a stub's actions for attempt n of u.
func (r *runner) stub(u *dag.Unit, n int, actions []Action) (time.Duration, *int, error) {
	ctx, cancel := context.WithCancelCause(r.ctx)
	defer cancel(nil)
	argv, env := local.Command(r.Flow, r.Dir, u, r.Count(u))
	c := &Call{Context: sdk.NewContext(ctx, r.contextConfig(u)), Attempt: n, Argv: argv, Env: env,
		timeout: u.Step.Timeout, cancel: cancel}
	var err error
	for _, a := range actions {
		if err = callAction(a, c); err != nil {
			break
		}
	}
	var exit *ExitError
	switch cause := context.Cause(c); {
	case errors.Is(cause, dag.ErrTimedOut):
		// Stopped at its timeout, as a process is by a signal.
		return c.took, new(-1), cause
	case err == nil:
		return c.took, new(0), nil
	case errors.As(err, &exit):
		return c.took, new(exit.Code), err
	}
	return c.took, new(1), err
}

// callAction calls a; a panic becomes an error, as in a Run body.
func callAction(a Action, c *Call) (err error) {
	if a == nil {
		return nil
	}
	return sdk.Invoke(func(*sdk.Context) error { return a(c) }, c.Context)
}

// table is the run's units in flow order, as Result.String shows them.
func (r *runner) table() [][]string {
	_, head, rows := r.UnitView(r.clock, []string{"EXIT"}, func(_ *dag.Unit, t record.Task) []string {
		if t.ExitCode == nil {
			return []string{""}
		}
		return []string{fmt.Sprint(*t.ExitCode)}
	})
	out := [][]string{append(head, "ERROR")}
	for i, row := range rows {
		out = append(out, append(row, r.Task(r.res.units[r.res.order[i]].u).Error))
	}
	return out
}
