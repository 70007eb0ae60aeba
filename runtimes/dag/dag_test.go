package dag_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

func TestSummary(t *testing.T) {
	for _, tt := range []struct {
		states []record.State
		want   record.State
	}{
		{[]record.State{record.Pending}, record.Pending},
		{[]record.State{record.Succeeded, record.Succeeded}, record.Succeeded},
		{[]record.State{record.Succeeded, record.Running}, record.Running},
		{[]record.State{record.Failed, record.Retrying}, record.Retrying},
		{[]record.State{record.Succeeded, record.Queued}, record.Queued},
		{[]record.State{record.Running, record.Queued}, record.Running},
		{[]record.State{record.Failed, record.Pending}, record.Running},
		{[]record.State{record.Failed, record.Succeeded}, record.Failed},
		{[]record.State{record.Failed, record.Interrupted}, record.Failed},
		{[]record.State{record.Skipped, record.Skipped}, record.Skipped},
		{[]record.State{record.Interrupted, record.Succeeded}, record.Interrupted},
		{[]record.State{record.Interrupted, record.Skipped}, record.Interrupted},
	} {
		ts := make([]record.Task, len(tt.states))
		for i, s := range tt.states {
			ts[i].State = s
		}
		if got := dag.Summary(ts); got != tt.want {
			t.Errorf("Summary(%v) = %s, want %s", tt.states, got, tt.want)
		}
	}
}

func TestFailure(t *testing.T) {
	one := []record.Task{{Step: "b", Error: "exit status 3"}}
	two := []record.Task{{Step: "b", Error: "exit status 3"}, {Step: "c", Index: new(2), Error: "OOMKilled"}}
	log := func(t record.Task) string { return " (log: " + t.Step + ".log)" }
	for _, tt := range []struct {
		failed     []record.Task
		notStarted []string
		detail     func(record.Task) string
		want       string
	}{
		{one, nil, nil, "step b failed: exit status 3"},
		{one, []string{"d", "e"}, log, "step b failed: exit status 3 (log: b.log); not started: d, e"},
		{two, []string{"d"}, nil, "steps b, c[2] failed; b: exit status 3; not started: d"},
		{[]record.Task{{Step: "b", Error: "Error (exit 1)\nlast lines"}}, []string{"d"}, nil, "step b failed: Error (exit 1)\nlast lines\nnot started: d"},
	} {
		if got := dag.Failure(tt.failed, tt.notStarted, tt.detail).Error(); got != tt.want {
			t.Errorf("Failure = %q, want %q", got, tt.want)
		}
	}
}

// TestRelease: a step starts once every step it waits for succeeded; the
// dependents of a failed step are skipped, transitively, and say why; the run
// fails naming them.
func TestRelease(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{
		{Name: "a"},
		{Name: "b", After: []string{"a"}},
		{Name: "c", After: []string{"b"}},
		{Name: "d"},
		{Name: "e", After: []string{"d"}, Foreach: []string{"x", "y"}},
	}}
	var out bytes.Buffer
	root := t.TempDir()
	dir, lk, err := record.Open(root, "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	r := dag.New(f, "r1", dir)
	r.Rec = record.Record{Flow: f.Name, ID: "r1"}
	for _, s := range f.Steps {
		r.Rec.Steps = append(r.Rec.Steps, record.StepInfo{Name: s.Name, After: s.After, Items: len(s.Foreach)})
	}
	r.Disp = display.New(display.Options{Stdout: &out})
	units := map[string]*dag.Unit{}
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.Foreach == nil {
			units[s.Name] = dag.NewUnit(s, -1)
			r.Add(units[s.Name])
			continue
		}
		for j := range s.Foreach {
			u := dag.NewUnit(s, j)
			units[u.Label] = u
			r.Add(u)
		}
	}
	if got := labels(r.Release()); got != "a d" {
		t.Fatalf("first release %q, want a d", got)
	}
	r.Start(units["a"])
	r.Start(units["d"])
	if got := labels(r.Release()); got != "" {
		t.Fatalf("release while a and d run: %q", got)
	}
	r.Fail(units["a"], "exit status 1", "", new(1))
	r.Succeed(units["d"], nil)
	if got := labels(r.Release()); got != "e[0] e[1]" {
		t.Fatalf("release after a failed, d succeeded: %q, want e[0] e[1]", got)
	}
	for _, l := range []string{"b", "c"} {
		if st := r.Task(units[l]); st.State != record.Skipped {
			t.Errorf("%s is %s, want skipped", l, st.State)
		}
	}
	if got := r.Task(units["c"]).Error; got != "not started: b skipped" {
		t.Errorf("c says %q", got)
	}
	r.Start(units["e[0]"])
	r.Start(units["e[1]"])
	r.Succeed(units["e[0]"], nil)
	if st := r.StepState("e"); st != record.Running {
		t.Errorf("e with one item done is %s, want running", st)
	}
	r.Succeed(units["e[1]"], nil)
	res, err := r.Finish(false, nil)
	if err == nil || err.Error() != "step a failed: exit status 1; not started: b, c" {
		t.Errorf("Finish: %v", err)
	}
	if res.State != record.Failed || strings.Join(res.NotStarted, ",") != "b,c" {
		t.Errorf("result %s, not started %v", res.State, res.NotStarted)
	}
	for _, want := range []string{"a: failed after 1 attempt: exit status 1", "b: not started: a failed", "c: not started: b skipped", "e[1]: succeeded in"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// What was recorded is what a later reader sees.
	_, tasks, err := record.Read(root, "r1")
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, tk := range tasks {
		states = append(states, tk.Label()+"="+string(tk.State))
	}
	if got := strings.Join(states, " "); got != "a=failed b=skipped c=skipped d=succeeded e[0]=succeeded e[1]=succeeded" {
		t.Errorf("recorded %s", got)
	}
}

// TestInterruptedRun: an interrupt that stops a unit, or leaves one unstarted,
// ends the run interrupted; one that comes after the last unit ended does not.
func TestInterruptedRun(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a"}, {Name: "b", After: []string{"a"}}}}
	for _, tt := range []struct {
		name string
		act  func(r *dag.Run, a, b *dag.Unit)
		want record.State
		// notInterrupted: the run's context did not end; something else
		// stopped the unit (a cluster's Workflow stopped from elsewhere).
		notInterrupted bool
	}{
		{name: "stopped", act: func(r *dag.Run, a, b *dag.Unit) { r.Start(a); r.Interrupt(a, "") }, want: record.Interrupted},
		{name: "unstarted", act: func(r *dag.Run, a, b *dag.Unit) { r.Start(a); r.Succeed(a, nil) }, want: record.Interrupted},
		{name: "stopped elsewhere", act: func(r *dag.Run, a, b *dag.Unit) {
			r.Start(a)
			r.Succeed(a, nil)
			r.Release()
			r.Start(b)
			r.Interrupt(b, "stopped")
		}, want: record.Interrupted, notInterrupted: true},
		{name: "after the end", act: func(r *dag.Run, a, b *dag.Unit) {
			r.Start(a)
			r.Succeed(a, nil)
			r.Release()
			r.Start(b)
			r.Succeed(b, nil)
		}, want: record.Succeeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := dag.New(f, "r1", t.TempDir())
			r.Disp = display.New(display.Options{})
			a, b := dag.NewUnit(&f.Steps[0], -1), dag.NewUnit(&f.Steps[1], -1)
			r.Add(a, b)
			r.Release()
			tt.act(r, a, b)
			res, err := r.Finish(!tt.notInterrupted, nil)
			if res.State != tt.want {
				t.Errorf("state %s, want %s (%v)", res.State, tt.want, err)
			}
			if (tt.want == record.Interrupted) != errors.Is(err, dag.ErrInterrupted) {
				t.Errorf("error %v", err)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		n    int
		want time.Duration
	}{
		{0, 1, 0},
		{0, 5, 0},
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 4, 8 * time.Second},
	} {
		if got := dag.Backoff(tt.d, tt.n); got != tt.want {
			t.Errorf("dag.Backoff(%s, %d) = %s, want %s", tt.d, tt.n, got, tt.want)
		}
	}
	if got := dag.Backoff(time.Hour, 1000); got <= 0 {
		t.Errorf("backoff overflows: %s", got)
	}
}

// TestReleaseJoin: a step that waits for several is released once the last of
// them succeeds, in whatever order they end, and skipped as soon as one fails
// while others still run; Unfinished counts the units not yet ended.
func TestReleaseJoin(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{
		{Name: "a"}, {Name: "b"}, {Name: "c"},
		{Name: "j", After: []string{"a", "b"}},
		{Name: "k", After: []string{"a", "b", "c"}},
		{Name: "l", After: []string{"k"}},
	}}
	dir, lk, err := record.Open(t.TempDir(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	r := dag.New(f, "r1", dir)
	r.Disp = display.New(display.Options{Stdout: &bytes.Buffer{}})
	units := map[string]*dag.Unit{}
	for i := range f.Steps {
		units[f.Steps[i].Name] = dag.NewUnit(&f.Steps[i], -1)
		r.Add(units[f.Steps[i].Name])
	}
	if got := labels(r.Release()); got != "a b c" {
		t.Fatalf("first release %q, want a b c", got)
	}
	for _, s := range []string{"a", "b", "c"} {
		r.Start(units[s])
	}
	r.Succeed(units["b"], nil)
	if got := labels(r.Release()); got != "" {
		t.Fatalf("release after b succeeded: %q, want none", got)
	}
	r.Fail(units["c"], "exit status 1", "", new(1))
	if got := labels(r.Release()); got != "" {
		t.Fatalf("release after c failed: %q, want none", got)
	}
	for _, s := range []string{"k", "l"} {
		if st := r.Task(units[s]).State; st != record.Skipped {
			t.Errorf("%s is %s while a runs and c failed, want skipped", s, st)
		}
	}
	if got := r.Task(units["k"]).Error; got != "not started: c failed" {
		t.Errorf("k says %q", got)
	}
	if n := r.Unfinished(); n != 2 {
		t.Errorf("Unfinished = %d with a running and j pending, want 2", n)
	}
	r.Succeed(units["a"], nil)
	if got := labels(r.Release()); got != "j" {
		t.Fatalf("release after a succeeded: %q, want j", got)
	}
	r.Start(units["j"])
	r.Succeed(units["j"], nil)
	if n := r.Unfinished(); n != 0 {
		t.Errorf("Unfinished = %d once every unit ended, want 0", n)
	}
}

// labels lists the labels of units, space-separated.
func labels(us []*dag.Unit) string {
	var l []string
	for _, u := range us {
		l = append(l, u.Label)
	}
	return strings.Join(l, " ")
}

// oneUnit is a run of flow f with a unit of its first step, released, that
// tells what happens in out.
func oneUnit(t *testing.T, f *plan.Flow) (*dag.Run, *dag.Unit, *bytes.Buffer) {
	out := &bytes.Buffer{}
	r := dag.New(f, "r1", t.TempDir())
	r.Disp = display.New(display.Options{Stdout: out})
	a := dag.NewUnit(&f.Steps[0], -1)
	r.Add(a)
	r.Release()
	return r, a, out
}

// TestRetried: a retry the engine makes itself whose next attempt already runs
// makes that attempt the unit's and tells which of how many it is; one yet to
// start leaves the unit waiting to retry, its error the failed attempt's.
func TestRetried(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a", Retry: 2}}}
	for _, tt := range []struct {
		name         string
		next         int
		wantState    record.State
		wantAttempts int
		wantError    string
		wantLine     string
	}{
		{"running", 3, record.Running, 3, "", "a: attempt 1 failed: boom; retrying (attempt 3 of 3)"},
		{"waiting", 0, record.Retrying, 1, "boom", "a: attempt 1 failed: boom; retrying"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, a, out := oneUnit(t, f)
			r.Start(a)
			r.Retried(a, 1, "boom", tt.next)
			r.Disp.Stop()
			if got := r.Task(a); got.State != tt.wantState || got.Attempts != tt.wantAttempts || got.Error != tt.wantError {
				t.Errorf("task %s, %d attempts, error %q; want %s, %d, %q", got.State, got.Attempts, got.Error, tt.wantState, tt.wantAttempts, tt.wantError)
			}
			if !strings.Contains(out.String(), tt.wantLine+"\n") {
				t.Errorf("output %q does not tell %q", out.String(), tt.wantLine)
			}
		})
	}
}

// TestSeen: an attempt its engine started is the unit's, running, its start
// the engine's for the first attempt, and told with the engine's own name for
// it; one seen after a takeover that recorded more attempts leaves the count.
func TestSeen(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a", Retry: 3}}}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	r, a, out := oneUnit(t, f)
	r.Seen(a, 1, "task_a", at)
	if got := r.Task(a); got.State != record.Running || got.Attempts != 1 || !got.Start.Equal(at) || got.Start.Location() != time.UTC {
		t.Errorf("first try: task %s, %d attempts, start %v; want running, 1, %v in UTC", got.State, got.Attempts, got.Start, at)
	}
	r.Retried(a, 1, "boom", 0)
	r.Amend(a, func(t *record.Task) { t.Attempts = 3 })
	r.Seen(a, 2, "task_a", at.Add(time.Minute))
	r.Disp.Stop()
	if got := r.Task(a); got.State != record.Running || got.Attempts != 3 || got.Error != "" || !got.Start.Equal(at) {
		t.Errorf("try seen after a takeover: task %s, %d attempts, error %q, start %v; want running, 3, none, %v", got.State, got.Attempts, got.Error, got.Start, at)
	}
	for _, want := range []string{"a: try 1 of task task_a running\n", "a: try 2 of task task_a running\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q does not tell %q", out.String(), want)
		}
	}
}

// TestResumeBeforeAdd: a unit resumed before it is added to the run, as a
// runtime resumes the items a fan-out makes at run time, counts once, in the
// state it resumed in: with a succeeded before, the resumed run has b alone
// unfinished, and releases it.
func TestResumeBeforeAdd(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a"}, {Name: "b", After: []string{"a"}}}}
	dir, lk, err := record.Open(t.TempDir(), "r1")
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	first := dag.New(f, "r1", dir)
	first.Disp = display.New(display.Options{Stdout: &bytes.Buffer{}})
	a, b := dag.NewUnit(&f.Steps[0], -1), dag.NewUnit(&f.Steps[1], -1)
	first.Add(a, b)
	first.Release()
	first.Start(a)
	first.Succeed(a, nil)

	again := dag.New(f, "r1", dir)
	again.Disp = display.New(display.Options{Stdout: &bytes.Buffer{}})
	a, b = dag.NewUnit(&f.Steps[0], -1), dag.NewUnit(&f.Steps[1], -1)
	for _, u := range []*dag.Unit{a, b} {
		if err := again.Resume(u); err != nil {
			t.Fatal(err)
		}
	}
	again.Add(a, b)
	if !a.Earlier || again.Task(a).State != record.Succeeded {
		t.Fatalf("a resumed: earlier %v, %s; want earlier, succeeded", a.Earlier, again.Task(a).State)
	}
	if n := again.Unfinished(); n != 1 {
		t.Errorf("Unfinished = %d with b alone to run, want 1", n)
	}
	if got := labels(again.Release()); got != "b" {
		t.Errorf("release of the resumed run: %q, want b", got)
	}
}
