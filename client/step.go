package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// Step is a step of a run.
type Step struct {
	Name  string
	After []string
	// Items is the number of foreach items, 0 for a step that runs once (and
	// for a foreach step a cluster ran as one JobSet: Item then reads any index,
	// and Tasks and Artifacts hold the step's own).
	Items int

	run   *Run
	tasks []*Task
	err   error
}

// Err says why the step is not one of the run's, or is nil.
func (s *Step) Err() error { return s.err }

// State sums up the state of the step's items, as the runtimes do (dag.Summary).
func (s *Step) State() record.State {
	ts := make([]record.Task, len(s.tasks))
	for i, t := range s.tasks {
		ts[i] = t.Task
	}
	return dag.Summary(ts)
}

// Tasks returns the step's foreach items in order, or its one task.
func (s *Step) Tasks() []*Task { return slices.Clone(s.tasks) }

// Task returns the one task of a step without foreach items.
func (s *Step) Task() *Task {
	switch {
	case s.err != nil:
		return &Task{Task: record.Task{Step: s.Name}, run: s.run, err: s.err}
	case s.Items > 0:
		return &Task{Task: record.Task{Step: s.Name}, run: s.run,
			err: fmt.Errorf("run %s: step %s has %s: choose one with Item (--index)", s.run.ID, s.Name, items(s.Items))}
	}
	return s.tasks[0]
}

// Item returns foreach item index of the step.
func (s *Step) Item(index int) *Task {
	t := &Task{Task: record.Task{Step: s.Name, Index: &index}, run: s.run}
	switch {
	case s.err != nil:
		t.err = s.err
	case s.Items == 0 && s.run.As == "jobset" && index >= 0:
		// A cluster run as JobSets records a foreach step as one unit; its items'
		// artifacts are still each item's own.
		t.Task = s.tasks[0].Task
		t.Index = &index
		t.Item = ""
		return t
	case s.Items == 0:
		t.err = fmt.Errorf("run %s: step %s has no foreach items: read it without an index", s.run.ID, s.Name)
	case index < 0 || index >= s.Items:
		t.err = fmt.Errorf("run %s: step %s has %s (0 to %d), not item %d", s.run.ID, s.Name, items(s.Items), s.Items-1, index)
	default:
		return s.tasks[index]
	}
	return t
}

// Artifact decodes artifact name of the step, a step without foreach items,
// into v.
func (s *Step) Artifact(ctx context.Context, name string, v any) error {
	return s.Task().Artifact(ctx, name, v)
}

// Artifacts lists the artifacts the step (each of its items) put.
func (s *Step) Artifacts(ctx context.Context) ([]ArtifactInfo, error) {
	if s.err != nil {
		return nil, s.err
	}
	var all []ArtifactInfo
	for _, t := range s.tasks {
		as, err := t.Artifacts(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, as...)
	}
	return all, nil
}

// Task is a step of a run, or one item of a foreach step: its state.json.
// Its Attempts method shadows the record's count of attempts, Task.Attempts.
type Task struct {
	record.Task

	run *Run
	err error
}

// Err says why the task is not one of the run's, or is nil.
func (t *Task) Err() error { return t.err }

// index is the task's foreach index, or -1.
func (t *Task) index() int {
	if t.Index == nil {
		return -1
	}
	return *t.Index
}

// Artifact decodes artifact name that the task put into v.
func (t *Task) Artifact(ctx context.Context, name string, v any) error {
	if t.err != nil {
		return t.err
	}
	return t.run.get(ctx, t.Step, t.index(), name, v)
}

// Artifacts lists the artifacts the task put.
func (t *Task) Artifacts(ctx context.Context) ([]ArtifactInfo, error) {
	if t.err != nil {
		return nil, t.err
	}
	return t.run.list(ctx, t.Step, t.index())
}

// StdoutPath and StderrPath return the paths of the task's logs in the run
// record. A log that is not there holds nothing; a cluster run keeps its pods'
// output, each line prefixed with the pod's label, in stdout.log.
func (t *Task) StdoutPath() string {
	return filepath.Join(record.StateDir(t.run.Dir, t.Step, t.index()), record.StdoutLog)
}

// StderrPath returns the path of the task's stderr.log: see StdoutPath.
func (t *Task) StderrPath() string {
	return filepath.Join(record.StateDir(t.run.Dir, t.Step, t.index()), record.StderrLog)
}

// Stdout returns what every attempt of the task wrote to its standard output,
// as the record keeps it.
func (t *Task) Stdout() ([]byte, error) { return t.log(record.StdoutLog) }

// Stderr returns what every attempt of the task wrote to its standard error.
func (t *Task) Stderr() ([]byte, error) { return t.log(record.StderrLog) }

// OpenStdout opens what every attempt of the task wrote to its standard
// output, as the record keeps it, to be read as it is (a log can be larger than
// memory): Stdout, streamed. A log that is not there reads empty.
func (t *Task) OpenStdout() (io.ReadCloser, error) { return t.open(record.StdoutLog) }

// OpenStderr opens what every attempt of the task wrote to its standard
// error: see OpenStdout.
func (t *Task) OpenStderr() (io.ReadCloser, error) { return t.open(record.StderrLog) }

// open opens the task's log name, within the run directory.
func (t *Task) open(name string) (io.ReadCloser, error) {
	if t.err != nil {
		return nil, t.err
	}
	f, err := record.OpenLog(t.run.Dir, t.Step, t.index(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return io.NopCloser(strings.NewReader("")), nil
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// log reads the task's log name, within the run directory.
func (t *Task) log(name string) ([]byte, error) {
	if t.err != nil {
		return nil, t.err
	}
	f, err := record.OpenLog(t.run.Dir, t.Step, t.index(), name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Attempt is one attempt of a task.
type Attempt struct {
	// N is the attempt's number, from 1.
	N int
	// State is the task's for its last attempt (failed while it waits to be
	// retried); every earlier attempt failed, as only a failure is retried.
	State record.State
	// Start is when the attempt started: the task's start for the first, the
	// attempt's mark in its logs for a retry that wrote output; else zero. End
	// is the last attempt's end, zero for the others.
	Start, End time.Time
	// ExitCode, Error and Reason are the last attempt's, as the record keeps
	// only that one's.
	ExitCode *int
	Error    string
	Reason   string
	// Stdout and Stderr are what the attempt wrote, as the local runtime marks
	// each attempt's output in its logs. A cluster run keeps its attempts'
	// output together: read it with Task.Stdout.
	Stdout, Stderr []byte
}

// Attempts returns the task's attempts in order; none when it never started.
func (t *Task) Attempts() ([]Attempt, error) {
	if t.err != nil {
		return nil, t.err
	}
	n := t.Task.Attempts
	as := make([]Attempt, n)
	for i := range as {
		as[i] = Attempt{N: i + 1, State: record.Failed}
	}
	if n == 0 {
		return as, nil
	}
	as[0].Start = t.Start
	last := &as[n-1]
	last.State, last.End, last.ExitCode, last.Error, last.Reason = t.State, t.End, t.ExitCode, t.Error, t.Reason
	if t.State == record.Retrying {
		last.State = record.Failed
	}
	if t.run.Runtime != record.Local {
		return as, nil
	}
	for _, stream := range []struct {
		name string
		out  func(*Attempt) *[]byte
	}{
		{record.StdoutLog, func(a *Attempt) *[]byte { return &a.Stdout }},
		{record.StderrLog, func(a *Attempt) *[]byte { return &a.Stderr }},
	} {
		data, err := t.log(stream.name)
		if err != nil {
			return nil, err
		}
		for _, part := range record.SplitAttempts(data) {
			if part.Attempt > n {
				continue
			}
			a := &as[part.Attempt-1]
			*stream.out(a) = part.Data
			if a.Start.IsZero() {
				a.Start = part.Start
			}
		}
	}
	return as, nil
}
