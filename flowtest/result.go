package flowtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// Result is how a run went: its error, each step's and item's record, the
// order they started in, and its run directory.
//
// Its Want methods check one thing each and, when it is not so, report with
// t.Errorf what was wanted, what the run did and a table of every step
// (String); the test goes on. WantSuccess alone stops the test (t.Fatalf), as
// what follows a failed run would only repeat it.
type Result struct {
	flow string
	dir  string
	err  error
	// order is every unit's label in flow order; started those that started,
	// in the order of their first attempt.
	order, started []string
	units          map[string]*unit
	elapsed        time.Duration
	table          [][]string
}

// unit is what the run knows of one step or item.
type unit struct {
	u   *dag.Unit
	rec record.Task
	// err is the error of its last attempt, as the step returned it.
	err error
	// first and last order events: when its first attempt started and when it
	// ended for good (-1: never).
	first, last int
}

// Err returns nil when every step succeeded; otherwise what the run command
// would report: which steps failed, why the first did, and which did not
// start ("step train failed: exit status 1; not started: evaluate").
func (r *Result) Err() error { return r.err }

// Dir returns the run directory, laid out as a local run's (runs/<id>/):
// run.json, <step>[/<index>]/<name>.json artifacts, and _steps/ with each
// step's state.json and logs.
func (r *Result) Dir() string { return r.dir }

// Elapsed returns how long the run took on the fake clock.
func (r *Result) Elapsed() time.Duration { return r.elapsed }

// Started returns the steps and items that started, in the order their first
// attempts did (labels: "train", "process[1]").
func (r *Result) Started() []string { return slices.Clone(r.started) }

// Tasks returns the record of every step and foreach item, in flow order, as
// its state.json holds it: state, attempts, start and end on the fake clock,
// exit code, error.
func (r *Result) Tasks() []record.Task {
	out := make([]record.Task, len(r.order))
	for i, l := range r.order {
		out[i] = r.units[l].rec
	}
	return out
}

// Task returns the record of a step, or of a foreach item labelled
// step[index]; false when the run has none of that label.
func (r *Result) Task(label string) (record.Task, bool) {
	u, ok := r.units[label]
	if !ok {
		return record.Task{}, false
	}
	return u.rec, true
}

// StepErr returns the error that the last attempt of a step (or item) ended
// with, as its Go function or stub returned it, so that errors.Is and errors.As
// see it; nil when it succeeded or never ran.
func (r *Result) StepErr(label string) error {
	if u, ok := r.units[label]; ok {
		return u.err
	}
	return nil
}

// Stdout returns what a step (or item) run with Exec wrote to its standard
// output, every attempt's, as its stdout.log holds it; "" for other steps.
func (r *Result) Stdout(label string) string {
	u, ok := r.units[label]
	if !ok {
		return ""
	}
	data, _ := os.ReadFile(filepath.Join(u.rec.Dir(r.dir), record.StdoutLog))
	return string(data)
}

// String is the run's table: every step and item with its state, exit code,
// attempts, time on the fake clock and error.
func (r *Result) String() string {
	var b strings.Builder
	state := "succeeded"
	if r.err != nil {
		state = "failed"
	}
	fmt.Fprintf(&b, "run of flow %s %s, %s on the fake clock:\n", r.flow, state, r.elapsed)
	var cells strings.Builder
	w := tabwriter.NewWriter(&cells, 0, 0, 2, ' ', 0)
	for _, row := range r.table {
		fmt.Fprintf(w, "  %s\n", strings.Join(row, "\t"))
	}
	w.Flush()
	for line := range strings.Lines(cells.String()) {
		b.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	return b.String()
}

// WantSuccess stops the test when the run did not succeed, with its error and
// table.
func (r *Result) WantSuccess(t testing.TB) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("flowtest: want the run to succeed, but %v\n%s", r.err, r)
	}
}

// WantRan checks that exactly steps started, in that order of their first
// attempts (a foreach step counts once, when its first item starts).
func (r *Result) WantRan(t testing.TB, steps ...string) {
	t.Helper()
	var ran []string
	for _, l := range r.started {
		if s := r.units[l].u.Step.Name; !slices.Contains(ran, s) {
			ran = append(ran, s)
		}
	}
	if !slices.Equal(ran, steps) {
		t.Errorf("flowtest: want steps to start in the order %s\n                      but they started as %s\n%s", list(steps), list(ran), r)
	}
}

// WantBefore checks that step (every item of it) ended before any attempt of
// each of later started: the order a test can count on when steps run side by
// side.
func (r *Result) WantBefore(t testing.TB, step string, later ...string) {
	t.Helper()
	ended, ok := r.span(step, true)
	if !ok {
		t.Errorf("flowtest: want %s to end before %s, but %s did not end (%s)\n%s", step, list(later), step, r.states(step), r)
		return
	}
	for _, l := range later {
		began, ok := r.span(l, false)
		switch {
		case !ok:
			t.Errorf("flowtest: want %s to start after %s ended, but %s never started (%s)\n%s", l, step, l, r.states(l), r)
		case began < ended:
			t.Errorf("flowtest: want %s to start after %s ended, but it started first\n%s", l, step, r)
		}
	}
}

// span returns when the last unit of step ended (end), or when its first one
// started; false when one never did, or the run has no such step.
func (r *Result) span(step string, end bool) (int, bool) {
	us := r.of(step)
	n := -1
	for _, u := range us {
		switch {
		case end && u.last < 0, !end && u.first < 0:
			return 0, false
		case end:
			n = max(n, u.last)
		case n < 0:
			n = u.first
		default:
			n = min(n, u.first)
		}
	}
	return n, len(us) > 0
}

// WantSkipped checks that step did not start (every item of a foreach step)
// because a step it waits for did not succeed, and that the reason recorded
// holds because ("" for any): WantSkipped(t, "evaluate", "train failed").
func (r *Result) WantSkipped(t testing.TB, step, because string) {
	t.Helper()
	units := r.of(step)
	if len(units) == 0 {
		t.Errorf("flowtest: want %s skipped, but flow %s has no step %s\n%s", step, r.flow, step, r)
		return
	}
	for _, u := range units {
		switch {
		case u.rec.State != record.Skipped:
			t.Errorf("flowtest: want %s skipped, but it %s\n%s", u.rec.Label(), did(u.rec), r)
			return
		case !strings.Contains(u.rec.Error, because):
			t.Errorf("flowtest: want %s skipped because %q, but it was skipped: %s\n%s", u.rec.Label(), because, u.rec.Error, r)
			return
		}
	}
}

// WantFailed checks that a step (or item, step[index]) failed for good, with
// an error that holds msg ("" for any).
func (r *Result) WantFailed(t testing.TB, label, msg string) {
	t.Helper()
	u, ok := r.unit(t, label)
	switch {
	case !ok:
	case u.rec.State != record.Failed:
		t.Errorf("flowtest: want %s to fail, but it %s\n%s", label, did(u.rec), r)
	case !strings.Contains(u.rec.Error, msg):
		t.Errorf("flowtest: want %s to fail with an error holding %q, but it failed: %s\n%s", label, msg, u.rec.Error, r)
	}
}

// WantAttempts checks that a step (or item, step[index]) made n attempts.
func (r *Result) WantAttempts(t testing.TB, label string, n int) {
	t.Helper()
	if u, ok := r.unit(t, label); ok && u.rec.Attempts != n {
		t.Errorf("flowtest: want %s to make %d attempts, but it made %d and %s\n%s", label, n, u.rec.Attempts, did(u.rec), r)
	}
}

// unit returns the unit labelled label, or reports that the run has none.
func (r *Result) unit(t testing.TB, label string) (*unit, bool) {
	t.Helper()
	if u, ok := r.units[label]; ok {
		return u, true
	}
	if us := r.of(label); len(us) > 0 {
		t.Errorf("flowtest: %s runs once per foreach item: name one, such as %s\n%s", label, us[0].rec.Label(), r)
		return nil, false
	}
	t.Errorf("flowtest: flow %s has no step or item %s; it has %s\n%s", r.flow, label, list(r.order), r)
	return nil, false
}

// of returns the units of step, in flow order.
func (r *Result) of(step string) []*unit {
	var us []*unit
	for _, l := range r.order {
		if u := r.units[l]; u.u.Step.Name == step {
			us = append(us, u)
		}
	}
	return us
}

// states says what became of step's units, for messages.
func (r *Result) states(step string) string {
	var out []string
	for _, u := range r.of(step) {
		out = append(out, u.rec.Label()+" "+did(u.rec))
	}
	if len(out) == 0 {
		return "flow " + r.flow + " has no step " + step
	}
	return strings.Join(out, ", ")
}

// did says how a unit ended, for messages.
func did(t record.Task) string {
	switch t.State {
	case record.Failed:
		return "failed: " + t.Error
	case record.Skipped:
		return "was skipped: " + t.Error
	case record.Pending:
		return "never started"
	}
	return string(t.State)
}

func list(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

// Artifact decodes the artifact name that step put, with the code a step's
// sdk.Context.Get uses. When the step put none, or it does not decode into a
// T, it stops the test and says so.
func Artifact[T any](t testing.TB, r *Result, step, name string) T {
	t.Helper()
	var v T
	if err := r.reader().Get(step, name, &v); err != nil {
		t.Fatalf("flowtest: %v\n%s", err, r)
	}
	return v
}

// ItemArtifact decodes the artifact name that item index of the foreach step
// put, as sdk.Context.GetIndex does; see Artifact.
func ItemArtifact[T any](t testing.TB, r *Result, step string, index int, name string) T {
	t.Helper()
	var v T
	if err := r.reader().GetIndex(step, index, name, &v); err != nil {
		t.Fatalf("flowtest: %v\n%s", err, r)
	}
	return v
}

// reader is an sdk.Context over the run's artifacts, for reading them.
func (r *Result) reader() *sdk.Context {
	return sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: r.flow, Index: -1, Store: artifact.Dir(r.dir)})
}
