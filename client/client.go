// Package client reads what past runs of a flow did and produced, from the record
// every runtime keeps (package record) and the artifact store the run kept its
// artifacts in (package artifact): a run's steps, their foreach items and
// attempts with states, times, exit codes, reasons and logs, and each artifact
// decoded into a Go value exactly as sdk.Context.Get decodes it.
//
//	c := client.Open("")                 // .manifold/runs
//	r, err := c.Latest("train-flow")
//	model, err := client.Artifact[Model](ctx, r, "train", "model")
//	attempts, err := r.Step("fan").Item(3).Attempts()
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
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/artifact/s3store"
	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/runtimes/record"
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
	return &Step{Name: name, run: r, err: fmt.Errorf("run %s of flow %s has no step %q; its steps are %s%s", r.ID, r.Flow, name, strings.Join(names, ", "), suggest.DidYouMean(name, names))}
}

// Store returns the store that holds the run's artifacts: the run directory of a
// local run; for a cluster run, its part of the flow's artifact store (the
// client's Store, else the one the record names).
func (r *Run) Store(ctx context.Context) (artifact.Store, error) {
	r.storeOnce.Do(func() { r.store, r.storeErr = r.openStore(ctx) })
	return r.store, r.storeErr
}

func (r *Run) openStore(ctx context.Context) (artifact.Store, error) {
	if r.Runtime == record.Local {
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
