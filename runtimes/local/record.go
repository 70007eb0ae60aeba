package local

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/sdk"
)

// DefaultRoot is where runs are kept, relative to the working directory.
const DefaultRoot = ".manifold/runs"

// Files and directories of a run directory. Step names are DNS-1123 labels, which
// hold no '_' or '.', so these never meet a step's artifact directory.
const (
	runFile   = "run.json"
	lockFile  = ".lock"
	stepsDir  = "_steps"
	stateFile = "state.json"
	// StdoutLog and StderrLog hold, in each step's (or item's) state directory,
	// what its attempts wrote.
	StdoutLog = "stdout.log"
	StderrLog = "stderr.log"
)

// State is where a run, a step or a foreach item stands.
type State string

// States. A run ends succeeded, failed or interrupted; a step or item also ends
// skipped (a step it waits for did not succeed).
const (
	Pending     State = "pending"
	Running     State = "running"
	Retrying    State = "retrying" // waiting out RetryBackoff before the next attempt
	Succeeded   State = "succeeded"
	Failed      State = "failed"
	Skipped     State = "skipped"
	Interrupted State = "interrupted"
	// Abandoned is what a reader reports for a run recorded as running whose runner
	// is gone (killed without a chance to record it).
	Abandoned State = "abandoned"
)

// Final reports whether s is an end state.
func (s State) Final() bool {
	switch s {
	case Succeeded, Failed, Skipped, Interrupted, Abandoned:
		return true
	}
	return false
}

// Record is a run's run.json.
type Record struct {
	Flow  string    `json:"flow"`
	ID    string    `json:"id"`
	State State     `json:"state"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// PID is the runner's process.
	PID int `json:"pid"`
	// Params are the flow params the run was made with; resuming it needs the same.
	Params map[string]string `json:"params,omitempty"`
	// Steps are the flow's steps in dependency order.
	Steps []StepInfo `json:"steps"`
	Error string     `json:"error,omitempty"`
}

// StepInfo names a step of a run and its foreach items.
type StepInfo struct {
	Name  string   `json:"name"`
	After []string `json:"after,omitempty"`
	// Items is the number of foreach items, 0 for a step that runs once.
	Items int `json:"items,omitempty"`
}

// Task is the state.json of one step, or of one item of a foreach step.
type Task struct {
	Step string `json:"step"`
	// Index and Item are a foreach item's; Index is nil for a step that runs once.
	Index *int   `json:"index,omitempty"`
	Item  string `json:"item,omitempty"`
	State State  `json:"state"`
	// Attempts counts the attempts made by the last runner that ran the task.
	Attempts int       `json:"attempts"`
	Start    time.Time `json:"start,omitzero"`
	End      time.Time `json:"end,omitzero"`
	// ExitCode is the last attempt's exit status, -1 when a signal ended it, nil
	// when no process ran.
	ExitCode *int   `json:"exitCode,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Label names the task in output: the step, with [index] for a foreach item.
func (t *Task) Label() string {
	if t.Index == nil {
		return t.Step
	}
	return t.Step + "[" + strconv.Itoa(*t.Index) + "]"
}

// StateDir returns the directory holding a step's (or item's) state.json and logs.
func StateDir(runDir, step string, index int) string {
	return sdk.ArtifactDir(filepath.Join(runDir, stepsDir), step, index)
}

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CheckRunID says what is wrong with a run ID given by a user, or nil.
func CheckRunID(id string) error {
	if !runIDPattern.MatchString(id) {
		return fmt.Errorf("run ID %q: use up to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", id)
	}
	return nil
}

// List returns the runs under root, oldest first (run IDs sort by their start). A
// missing root holds no runs. Runs whose run.json cannot be read are left out.
func List(root string) ([]Record, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var runs []Record
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		rec, err := readRecord(filepath.Join(root, e.Name()))
		if err != nil {
			continue
		}
		runs = append(runs, *rec)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID < runs[j].ID })
	return runs, nil
}

// Read returns the run id under root and the state of each of its steps and items,
// in the flow's order. Steps that never started are reported pending.
func Read(root, id string) (*Record, []Task, error) {
	if err := CheckRunID(id); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(root, id)
	rec, err := readRecord(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("no run %s in %s", id, root)
	}
	if err != nil {
		return nil, nil, err
	}
	var tasks []Task
	for _, s := range rec.Steps {
		n := max(s.Items, 1)
		for i := range n {
			index := -1
			if s.Items > 0 {
				index = i
			}
			t, err := readTask(dir, s.Name, index)
			if err != nil {
				return nil, nil, err
			}
			tasks = append(tasks, t)
		}
	}
	return rec, tasks, nil
}

// readRecord reads run.json of dir, reporting a run recorded as running whose
// runner no longer holds the lock as abandoned.
func readRecord(dir string) (*Record, error) {
	data, err := os.ReadFile(filepath.Join(dir, runFile))
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, runFile), err)
	}
	if rec.State == Running && !locked(dir) {
		rec.State = Abandoned
	}
	return &rec, nil
}

func readTask(runDir, step string, index int) (Task, error) {
	t := Task{Step: step, State: Pending}
	if index >= 0 {
		t.Index = &index
	}
	data, err := os.ReadFile(filepath.Join(StateDir(runDir, step, index), stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("%s: %w", filepath.Join(StateDir(runDir, step, index), stateFile), err)
	}
	return t, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// lock takes the run directory's lock for this process, or returns errBusy.
func lock(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f, true); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

var errBusy = errors.New("another runner holds it")

// locked reports whether a runner holds dir's lock.
func locked(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(tryLock(f, false), errBusy)
}
