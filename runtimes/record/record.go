// Package record reads and writes run directories, the record of a flow's runs that
// every runtime keeps the same way, so that `runs list` and `runs show` read a local
// run and a cluster run alike.
//
// A run keeps everything under <root>/<run id>/:
//
//	run.json                          the run: flow, params, steps, state, start and end
//	<step>/[<index>/]<name>.json      artifacts (sdk.Context.Put; MANIFOLD_ARTIFACTS)
//	_steps/<step>/[<index>/]          state.json, stdout.log and stderr.log of each step or item
//	.lock                             held by the runner while the run goes on
//
// Files are written through a temporary file renamed into place, so a reader never
// sees half of one. A run recorded as running whose lock no runner holds reads as
// abandoned.
package record

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/runid"
)

// DefaultRoot is where runs are kept, relative to the working directory.
const DefaultRoot = ".manifold/runs"

// Files and directories of a run directory. Step names are DNS-1123 labels, which
// hold no '_' or '.', so these never meet a step's artifact directory.
const (
	runFile  = "run.json"
	lockFile = ".lock"
	stepsDir = "_steps"
	// StateFile holds, in each step's (or item's) state directory, its Task;
	// StdoutLog and StderrLog what its attempts wrote.
	StateFile = "state.json"
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
	// Queued is a step or item submitted to a cluster that waits for admission
	// (a queue, quota or capacity) before its pods can start.
	Queued State = "queued"
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
	Flow string `json:"flow"`
	ID   string `json:"id"`
	// UID tells the run apart from another of the same flow and ID: a cluster
	// run labels its objects with it (manifold.dev/run-uid), and a resume
	// keeps it, so that a resume adopts only what this run made.
	UID   string    `json:"uid,omitempty"`
	State State     `json:"state"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	// Spans are the times each runner of a resumed run ran it, in order (a
	// run never resumed records none: it ran from Start to End). Took sums
	// them: the time between a runner's end and a resume is not the run's.
	Spans []Span `json:"spans,omitempty"`
	// PID is the runner's process.
	PID int `json:"pid"`
	// Runtime names what ran the run: Local (empty, this machine), Kube,
	// Argo or Airflow.
	Runtime Runtime `json:"runtime,omitempty"`
	// Cluster is the API server's URL of a cluster run, Context the kubeconfig
	// context it was reached through, Namespace where its workloads ran and As
	// what they ran as ("job" or "jobset").
	Cluster   string `json:"cluster,omitempty"`
	Context   string `json:"context,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	As        string `json:"as,omitempty"`
	// Artifacts is the artifact store a cluster run's steps kept their
	// artifacts in; nil when they are in the run directory (a local run), or
	// stayed in the pods' own file systems (a cluster run without a store).
	Artifacts *Artifacts `json:"artifacts,omitempty"`
	// Params are the flow params the run was made with; resuming it needs the same.
	Params map[string]string `json:"params,omitempty"`
	// Steps are the flow's steps in dependency order.
	Steps []StepInfo `json:"steps"`
	Error string     `json:"error,omitempty"`
}

// Span is the time one runner ran a run: from its start to its end, which is
// zero while it runs (or when the runner was killed before it recorded it).
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
}

// Took is how long the run ran, with now the end of a span that goes on (the
// last, without an end): the sum of its Spans, or from Start to End (or now)
// when it has none.
func (rec *Record) Took(now time.Time) time.Duration {
	spans := rec.Spans
	if len(spans) == 0 {
		spans = []Span{{Start: rec.Start, End: rec.End}}
	}
	var d time.Duration
	for i, s := range spans {
		end := s.End
		if end.IsZero() && i == len(spans)-1 {
			end = now
		}
		if end.After(s.Start) {
			d += end.Sub(s.Start)
		}
	}
	return d
}

// Artifacts says where a run's artifacts are kept: the flow's artifact store,
// the run's own part of it being under artifact.RunLocation.
type Artifacts struct {
	// URL is the store's root: s3://bucket/prefix, or the path at which the
	// volume Claim was mounted in every pod.
	URL string `json:"url"`
	// Endpoint is the S3 endpoint of an S3-compatible server, "" for AWS's own.
	Endpoint string `json:"endpoint,omitempty"`
	// Claim is the ReadWriteMany PersistentVolumeClaim of a volume store.
	Claim string `json:"claim,omitempty"`
}

// StepInfo names a step of a run and its foreach items.
type StepInfo struct {
	Name  string   `json:"name"`
	After []string `json:"after,omitempty"`
	// Items is the number of foreach items, 0 for a step that runs once.
	Items int `json:"items,omitempty"`
	// FanOut is set for a step whose items are found at run time
	// (sdk.ForeachOf): Items is 0 until they are.
	FanOut bool `json:"fanOut,omitempty"`
	// Spec is a digest of the step as it was compiled for the run, and Build
	// one of the flow program's build for a step whose body is the program's
	// (a Run step), "" for others: a resume runs again a step whose digests
	// changed, and every step that waits for it.
	Spec  string `json:"spec,omitempty"`
	Build string `json:"build,omitempty"`
	// Stubbed says the step was stubbed when the run last ran it: its units
	// succeeded without running its program (a rehearsal, Task.Stubbed). A
	// resume without the stub runs it again, with every step that waits for
	// it.
	Stubbed bool `json:"stubbed,omitempty"`
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
	// Pods name the pods of the last attempt of a cluster run, and Node the
	// nodes they ran on, comma-separated.
	Pods []string `json:"pods,omitempty"`
	Node string   `json:"node,omitempty"`
	// Reason is the cluster's word for how the last attempt ended or why it
	// waits: OOMKilled, ImagePullBackOff, Unschedulable…
	Reason string `json:"reason,omitempty"`
	// Stubbed says the task succeeded without running its program: its step
	// was stubbed (a rehearsal of the flow, run --stub).
	Stubbed bool `json:"stubbed,omitempty"`
}

// Shown is the task's state as output shows it: "stubbed" for a task that
// succeeded stubbed, so that a rehearsal never reads as a real run.
func (t *Task) Shown() string {
	if t.Stubbed && t.State == Succeeded {
		return "stubbed"
	}
	return string(t.State)
}

// Stubbed returns the steps of the run that were stubbed when it last ran
// (StepInfo.Stubbed), in flow order.
func (rec *Record) Stubbed() []string {
	var steps []string
	for _, s := range rec.Steps {
		if s.Stubbed {
			steps = append(steps, s.Name)
		}
	}
	return steps
}

// Label names the task in output: the step, with [index] for a foreach item.
func (t *Task) Label() string {
	if t.Index == nil {
		return t.Step
	}
	return t.Step + "[" + strconv.Itoa(*t.Index) + "]"
}

// index is the task's foreach index, or -1.
func (t *Task) index() int {
	if t.Index == nil {
		return -1
	}
	return *t.Index
}

// Dir returns the directory of run runDir that holds the task's state.json and
// logs: StateDir.
func (t *Task) Dir(runDir string) string { return StateDir(runDir, t.Step, t.index()) }

// StateDir returns the directory holding a step's (or item's) state.json and logs,
// _steps/<step>/[<index>/] in the run directory; index is -1 for a step without
// foreach items.
func StateDir(runDir, step string, index int) string {
	dir := filepath.Join(runDir, stepsDir, step)
	if index < 0 {
		return dir
	}
	return filepath.Join(dir, strconv.Itoa(index))
}

// List returns the runs under root, oldest first: by their start, then (for runs
// that started at once, or have not started) by run ID. A missing root holds no
// runs. Runs whose run.json cannot be read are left out:
// Scan says why.
func List(root string) ([]Record, error) {
	runs, _, err := Scan(root)
	return runs, err
}

// Scan is List that also returns, for each run directory whose run.json is
// there but cannot be read (see ReadRecord), the error that says so. A
// directory without run.json is no run.
func Scan(root string) ([]Record, []error, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var runs []Record
	var damaged []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		rec, err := ReadRecord(filepath.Join(root, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			damaged = append(damaged, err)
			continue
		}
		runs = append(runs, *rec)
	}
	slices.SortFunc(runs, func(a, b Record) int {
		return cmp.Or(a.Start.Compare(b.Start), strings.Compare(a.ID, b.ID))
	})
	return runs, damaged, nil
}

// Read returns the run id under root and the state of each of its steps and items,
// in the flow's order. Steps that never started are reported pending. A record
// that no runner could have written (see ReadRecord) is an error that names its
// file and field. An engine's run (Argo, Airflow) is recorded under the engine's
// run ID, which runid.CheckStore holds to, and is read by it.
func Read(root, id string) (*Record, []Task, error) {
	if err := runid.CheckStore(id); err != nil {
		return nil, nil, err
	}
	dir := filepath.Join(root, id)
	rec, err := ReadRecord(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("no run %s in %s", id, root)
	}
	if err != nil {
		return nil, nil, err
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	var tasks []Task
	for _, s := range rec.Steps {
		if s.Items == 0 && s.FanOut {
			// No item: a fan-out over an empty list, or one not yet made, or
			// one that ended as a whole (not taken, or its list unread).
			if _, err := r.Stat(filepath.Join(StateDir("", s.Name, -1), StateFile)); err != nil {
				continue
			}
		}
		if s.Items == 0 {
			t, err := readTask(r, dir, s.Name, -1)
			if err != nil {
				return nil, nil, err
			}
			tasks = append(tasks, t)
			continue
		}
		// Only the items that have a state directory are read.
		started, err := startedItems(r, s.Name, s.Items)
		if err != nil {
			return nil, nil, err
		}
		for i := range s.Items {
			if !started[i] {
				tasks = append(tasks, Task{Step: s.Name, Index: new(i), State: Pending})
				continue
			}
			t, err := readTask(r, dir, s.Name, i)
			if err != nil {
				return nil, nil, err
			}
			tasks = append(tasks, t)
		}
	}
	return rec, tasks, nil
}

// startedItems says which of the items of foreach step have a state directory
// in the run directory opened as root.
func startedItems(root *os.Root, step string, items int) ([]bool, error) {
	started := make([]bool, items)
	f, err := root.Open(StateDir("", step, -1))
	if errors.Is(err, fs.ErrNotExist) {
		return started, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		if i, err := strconv.Atoi(name); err == nil && i >= 0 && i < items && strconv.Itoa(i) == name {
			started[i] = true
		}
	}
	return started, nil
}

// ReadRecord reads the run.json of run directory dir, reporting a run recorded as
// running whose runner no longer holds the lock as abandoned. A run directory
// without run.json is an error that wraps fs.ErrNotExist. A run.json that no
// runner could have written is an error that names the file and the field and
// says what to do: one larger, or of more values, than any runner writes, not
// JSON, or holding a flow or step name that compile refuses, a run ID other
// than its directory's or one runid refuses, an unknown state or runtime, or
// more foreach items than a flow may have.
func ReadRecord(dir string) (*Record, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var rec Record
	if err := readJSON(r, dir, runFile, maxRecordBytes, maxRecordValues, &rec); err != nil {
		return nil, err
	}
	if errs := rec.check(dir); len(errs) > 0 {
		return nil, damagedError(dir, filepath.Join(dir, runFile), fieldErrors(errs))
	}
	if rec.State == Running && !locked(dir) {
		rec.State = Abandoned
	}
	return &rec, nil
}

// ReadTask reads the state.json of a step (index -1) or of item index of a
// foreach step. A task without one has not started: it reads as pending. A
// state.json that is not the task's (another step or index, an unknown state,
// more attempts than a step may make) is an error that names the file and the
// field.
func ReadTask(runDir, step string, index int) (Task, error) {
	if err := checkTask(step, index); err != nil {
		return Task{Step: step, State: Pending}, err
	}
	r, err := os.OpenRoot(runDir)
	if err != nil {
		return Task{Step: step, State: Pending}, err
	}
	defer r.Close()
	return readTask(r, runDir, step, index)
}

// readTask is ReadTask within root, the run directory runDir opened. On an
// error it returns the task as pending, nothing of what the file held.
func readTask(root *os.Root, runDir, step string, index int) (Task, error) {
	pending := Task{Step: step, State: Pending}
	if index >= 0 {
		pending.Index = &index
	}
	t := pending
	if index >= 0 {
		// Decoding writes through the pointer: it must not be pending's.
		i := index
		t.Index = &i
	}
	rel := filepath.Join(StateDir("", step, index), StateFile)
	err := readJSON(root, runDir, rel, maxTaskBytes, maxTaskValues, &t)
	if errors.Is(err, fs.ErrNotExist) {
		return pending, nil
	}
	if err != nil {
		return pending, err
	}
	if errs := t.check(step, index); len(errs) > 0 {
		return pending, damagedError(runDir, filepath.Join(runDir, rel), fieldErrors(errs))
	}
	return t, nil
}

// WriteRecord writes rec as the run.json of run directory dir, which must exist,
// replacing the previous one at once; its Cluster and Error withhold what looks
// like a credential (credential.Redact).
func WriteRecord(dir string, rec Record) error {
	// What a record prints withholds credentials, as every output does.
	rec.Cluster, rec.Error = credential.Redact("", rec.Cluster), credential.Redact("", rec.Error)
	return writeJSON(filepath.Join(dir, runFile), rec)
}

// WriteTask writes t as the state.json of its step or item in run directory
// runDir, making its state directory when needed and replacing the previous
// state.json at once; its Error and Reason withhold what looks like a
// credential (credential.Redact).
func WriteTask(runDir string, t Task) error {
	dir := StateDir(runDir, t.Step, t.index())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t.Error, t.Reason = credential.Redact("", t.Error), credential.Redact("", t.Reason)
	return writeJSON(filepath.Join(dir, StateFile), t)
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// Resumable checks that run prev, as recorded, can be resumed as a run of flow
// with params: the same flow, and no param given another value.
func Resumable(prev *Record, flow string, params map[string]string) error {
	if prev.Flow != flow {
		return fmt.Errorf("run %s belongs to flow %s, not %s: choose another --run-id", prev.ID, prev.Flow, flow)
	}
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if old, ok := prev.Params[name]; ok && old != params[name] {
			return fmt.Errorf("run %s was made with --param %s=%s, not %s: resume it with the same params, or start a new run without --run-id", prev.ID, name, Shown(name, old), Shown(name, params[name]))
		}
	}
	return nil
}

// Shown is a param's value (or, with name "", a foreach item) as output prints
// it: credential.Redact's, every credential in it withheld. The record keeps it
// as given, as resuming compares params.
func Shown(name, value string) string { return credential.Redact(name, value) }
