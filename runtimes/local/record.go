package local

import (
	"github.com/manifoldflow/manifold/runtimes/record"
)

// What a local run records is package record's run directory; these names keep
// this package's API whole for its callers.

// DefaultRoot is where runs are kept, relative to the working directory.
const DefaultRoot = record.DefaultRoot

// StdoutLog and StderrLog hold, in each step's (or item's) state directory, what
// its attempts wrote.
const (
	StdoutLog = record.StdoutLog
	StderrLog = record.StderrLog
)

// State is where a run, a step or a foreach item stands.
type State = record.State

// States. A run ends succeeded, failed or interrupted; a step or item also ends
// skipped (a step it waits for did not succeed). A local run never queues.
const (
	Pending     = record.Pending
	Running     = record.Running
	Retrying    = record.Retrying
	Succeeded   = record.Succeeded
	Failed      = record.Failed
	Skipped     = record.Skipped
	Interrupted = record.Interrupted
	Abandoned   = record.Abandoned
)

// Record is a run's run.json.
type Record = record.Record

// StepInfo names a step of a run and its foreach items.
type StepInfo = record.StepInfo

// Task is the state.json of one step, or of one item of a foreach step.
type Task = record.Task

// StateDir returns the directory holding a step's (or item's) state.json and logs:
// record.StateDir.
func StateDir(runDir, step string, index int) string { return record.StateDir(runDir, step, index) }

// List returns the runs under root, oldest first: record.List.
func List(root string) ([]Record, error) { return record.List(root) }

// Read returns the run id under root and the state of each of its steps and
// items, in the flow's order: record.Read.
func Read(root, id string) (*Record, []Task, error) { return record.Read(root, id) }
