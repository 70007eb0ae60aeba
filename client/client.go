// Package client reads what past runs of a flow did and produced, from the record
// every runtime keeps (package record) and the artifact store the run kept its
// artifacts in (package artifact): a run's steps, their foreach items and
// attempts with states, times, exit codes, reasons and logs, and each artifact
// decoded into a Go value exactly as sdk.Context.Get decodes it.
//
//	c := client.Open("")                 // .manifold/runs
//	r, err := c.Latest("train-flow")
//	model, err := client.Artifact[Model](ctx, r, "train", "model")
//	for _, a := range r.Step("fan").Item(3).Attempts() { ... }
//
// A local run keeps its artifacts in its run directory. A cluster run's record
// names the flow's artifact store: an S3 store is read where it is; a volume
// (a PersistentVolumeClaim) is read where it is mounted on this machine, which
// the Store option gives.
//
// Step, Item and Task never return nil: a step or item the run does not have
// is one whose Err, and every method that returns an error, says so, naming
// what the run has. Chains such as r.Step("fan").Item(3).Artifact(ctx, "score",
// &v) report the first thing that is missing.
package client

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/artifact/s3store"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// Client reads the runs recorded under one root.
type Client struct {
	root     string
	store    string
	endpoint string
}

// Option changes how a Client reads runs.
type Option interface{ apply(*Client) }

type storeOption string

func (o storeOption) apply(c *Client) { c.store = string(o) }

// Store reads cluster runs' artifacts from the artifact store whose root is
// location, an s3://bucket/prefix URL or a directory, instead of the one their
// record names: a volume store where its claim is mounted on this machine, or a
// copy of a store. A run's artifacts are under artifact.RunLocation of it.
func Store(location string) Option { return storeOption(location) }

type endpointOption string

func (o endpointOption) apply(c *Client) { c.endpoint = string(o) }

// Endpoint reads an S3 store through url (an S3-compatible server as this
// machine reaches it) instead of the endpoint the run's record names.
func Endpoint(url string) Option { return endpointOption(url) }

// Open returns a Client of the runs recorded under root: record.DefaultRoot
// when root is "".
func Open(root string, opts ...Option) *Client {
	if root == "" {
		root = record.DefaultRoot
	}
	c := &Client{root: root}
	for _, o := range opts {
		o.apply(c)
	}
	return c
}

// Root returns the directory the client reads runs from.
func (c *Client) Root() string { return c.root }

// Runs returns the runs of flow, oldest first; every flow's when flow is "".
func (c *Client) Runs(flow string) ([]*Run, error) {
	recs, err := record.List(c.root)
	if err != nil {
		return nil, err
	}
	var runs []*Run
	for _, rec := range recs {
		if flow != "" && rec.Flow != flow {
			continue
		}
		r, err := c.Run(rec.ID)
		if err != nil {
			return nil, err
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// Latest returns the last run of flow to start.
func (c *Client) Latest(flow string) (*Run, error) {
	runs, err := c.Runs(flow)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("no run of flow %s in %s: run it first, or open the directory it ran in", flow, c.root)
	}
	return runs[len(runs)-1], nil
}

// Run opens run id.
func (c *Client) Run(id string) (*Run, error) {
	rec, tasks, err := record.Read(c.root, id)
	if err != nil {
		return nil, err
	}
	r := &Run{Record: *rec, Dir: filepath.Join(c.root, id), c: c}
	i := 0
	for _, info := range rec.Steps {
		s := &Step{Name: info.Name, After: info.After, Items: info.Items, run: r}
		for range max(info.Items, 1) {
			s.tasks = append(s.tasks, &Task{Task: tasks[i], run: r})
			i++
		}
		r.steps = append(r.steps, s)
	}
	return r, nil
}

// Run is a recorded run: its run.json, and its steps.
type Run struct {
	record.Record
	// Dir is the run directory.
	Dir string

	c     *Client
	steps []*Step

	storeOnce sync.Once
	store     artifact.Store
	storeErr  error
}

// Steps returns the run's steps in the flow's dependency order.
func (r *Run) Steps() []*Step { return slices.Clone(r.steps) }

// Tasks returns every step and foreach item of the run, in flow order.
func (r *Run) Tasks() []*Task {
	var ts []*Task
	for _, s := range r.steps {
		ts = append(ts, s.tasks...)
	}
	return ts
}

// Step returns the run's step name. When the run has none, the step's Err says
// so.
func (r *Run) Step(name string) *Step {
	for _, s := range r.steps {
		if s.Name == name {
			return s
		}
	}
	names := make([]string, len(r.steps))
	for i, s := range r.steps {
		names[i] = s.Name
	}
	return &Step{Name: name, run: r, err: fmt.Errorf("run %s of flow %s has no step %q; its steps are %s", r.ID, r.Flow, name, strings.Join(names, ", "))}
}

// Store returns the store that holds the run's artifacts: the run directory of a
// local run; for a cluster run, its part of the flow's artifact store (the
// client's Store, else the one the record names).
func (r *Run) Store(ctx context.Context) (artifact.Store, error) {
	r.storeOnce.Do(func() { r.store, r.storeErr = r.openStore(ctx) })
	return r.store, r.storeErr
}

func (r *Run) openStore(ctx context.Context) (artifact.Store, error) {
	if r.Runtime == "" {
		return artifact.Dir(r.Dir), nil
	}
	endpoint := r.c.endpoint
	root := r.c.store
	if root == "" {
		a := r.Record.Artifacts
		switch {
		case a == nil:
			return nil, fmt.Errorf("run %s ran on a cluster without an artifact store, so its artifacts stayed in its pods: give the flow one (--artifacts s3://bucket/prefix or pvc://CLAIM) to read them back", r.ID)
		case a.Claim != "":
			return nil, fmt.Errorf("run %s kept its artifacts on volume claim %s (at %s in its pods): mount the volume on this machine and name the directory with --store DIR (client.Store)", r.ID, a.Claim, a.URL)
		}
		root = a.URL
		if endpoint == "" {
			endpoint = a.Endpoint
		}
	}
	location := artifact.RunLocation(root, r.Flow, r.ID)
	if !strings.HasPrefix(location, "s3://") {
		if info, err := os.Stat(location); err != nil || !info.IsDir() {
			return nil, fmt.Errorf("run %s: no directory %s: is the artifact volume mounted at %s?", r.ID, location, root)
		}
	}
	return OpenStore(ctx, location, endpoint)
}

// OpenStore opens the artifact store at location: an s3:// URL (through
// endpoint, "" for AWS's own) or a directory.
func OpenStore(ctx context.Context, location, endpoint string) (artifact.Store, error) {
	if !strings.HasPrefix(location, "s3://") {
		return artifact.Dir(location), nil
	}
	s, err := s3store.New(ctx, location, s3store.Options{Endpoint: endpoint})
	if err != nil {
		return nil, fmt.Errorf("artifact store: %w", err)
	}
	return s, nil
}

// ArtifactInfo describes an artifact of a run.
type ArtifactInfo struct {
	Step string
	// Index is the foreach item that put it, -1 for a step without items.
	Index int
	Name  string
	Size  int64
	// Location is where it is kept: a path or an s3:// URL.
	Location string
}

// Artifacts lists the artifacts of every step and item of the run, in flow
// order.
func (r *Run) Artifacts(ctx context.Context) ([]ArtifactInfo, error) {
	var all []ArtifactInfo
	for _, s := range r.steps {
		as, err := s.Artifacts(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, as...)
	}
	return all, nil
}

// list returns the artifacts of step (item index, or -1).
func (r *Run) list(ctx context.Context, step string, index int) ([]ArtifactInfo, error) {
	store, err := r.Store(ctx)
	if err != nil {
		return nil, err
	}
	l, ok := store.(artifact.Lister)
	if !ok {
		return nil, fmt.Errorf("run %s: the artifact store at %s cannot list what it holds", r.ID, store.Location(""))
	}
	entries, err := l.List(ctx, artifact.StepKey(step, index))
	if err != nil {
		return nil, fmt.Errorf("run %s: listing the artifacts of %s: %w", r.ID, describe(step, index), err)
	}
	infos := make([]ArtifactInfo, len(entries))
	for i, e := range entries {
		name := strings.TrimSuffix(e.Key[strings.LastIndexByte(e.Key, '/')+1:], ".json")
		infos[i] = ArtifactInfo{Step: step, Index: index, Name: name, Size: e.Size, Location: store.Location(e.Key)}
	}
	return infos, nil
}

// get decodes artifact name of step (item index, or -1) into v, through
// sdk.Context's GetIndex: the decoding every step's Get does.
func (r *Run) get(ctx context.Context, step string, index int, name string, v any) error {
	store, err := r.Store(ctx)
	if err != nil {
		return err
	}
	sc := sdk.NewContext(ctx, sdk.ContextConfig{Flow: r.Flow, Index: -1, Store: store})
	if index < 0 {
		err = sc.Get(step, name, v)
	} else {
		err = sc.GetIndex(step, index, name, v)
	}
	if err == nil {
		return nil
	}
	// When the artifact is not there, say what is.
	if _, gerr := store.Get(ctx, artifact.Key(step, index, name)); artifact.IsNotExist(gerr) {
		if have, lerr := r.list(ctx, step, index); lerr == nil {
			names := make([]string, len(have))
			for i, a := range have {
				names[i] = a.Name
			}
			if len(names) == 0 {
				return fmt.Errorf("run %s: %s has no artifact %q: it put none (in %s)", r.ID, describe(step, index), name, store.Location(artifact.StepKey(step, index)))
			}
			return fmt.Errorf("run %s: %s has no artifact %q; it has %s", r.ID, describe(step, index), name, strings.Join(names, ", "))
		}
	}
	return fmt.Errorf("run %s: %w", r.ID, err)
}

// Artifact decodes artifact name of step, a step without foreach items, of run
// r into a T.
func Artifact[T any](ctx context.Context, r *Run, step, name string) (T, error) {
	var v T
	err := r.Step(step).Artifact(ctx, name, &v)
	return v, err
}

// ItemArtifact decodes artifact name of item index of foreach step of run r
// into a T.
func ItemArtifact[T any](ctx context.Context, r *Run, step string, index int, name string) (T, error) {
	var v T
	err := r.Step(step).Item(index).Artifact(ctx, name, &v)
	return v, err
}

// Step is a step of a run.
type Step struct {
	Name  string
	After []string
	// Items is the number of foreach items, 0 for a step that runs once (and
	// for a foreach step a cluster ran as one JobSet).
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
func (t *Task) Stdout() ([]byte, error) { return t.log(t.StdoutPath()) }

// Stderr returns what every attempt of the task wrote to its standard error.
func (t *Task) Stderr() ([]byte, error) { return t.log(t.StderrPath()) }

func (t *Task) log(path string) ([]byte, error) {
	if t.err != nil {
		return nil, t.err
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
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
	if t.run.Runtime != "" {
		return as, nil
	}
	for _, stream := range []struct {
		path string
		out  func(*Attempt) *[]byte
	}{
		{t.StdoutPath(), func(a *Attempt) *[]byte { return &a.Stdout }},
		{t.StderrPath(), func(a *Attempt) *[]byte { return &a.Stderr }},
	} {
		data, err := t.log(stream.path)
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

// describe names a step, or an item of a foreach step, in messages.
func describe(step string, index int) string {
	if index < 0 {
		return "step " + step
	}
	return "item " + strconv.Itoa(index) + " of step " + step
}

func items(n int) string {
	if n == 1 {
		return "1 foreach item"
	}
	return strconv.Itoa(n) + " foreach items"
}
