// Package output defines the documents that a flow program prints with
// -o json and -o yaml: RunList (runs list), Run (runs show), Validation
// (validate) and Check (check). Each document names its schema with apiVersion
// and kind, as Kubernetes objects do, so that a program can tell what it
// reads; a field is added to a version, never changed or taken away.
// docs/reference/output.md describes every field, with an example of each.
//
// A Go program decodes what the command printed into these types:
//
//	var list output.RunList
//	err := json.Unmarshal(out, &list)
//
// Times are RFC 3339, durations seconds. Values that look like credentials
// (params, foreach items, errors that quote them) are redacted as in the table.
package output

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// APIVersion is the schema version of every document of this package.
const APIVersion = "manifold.dev/v1"

// The kinds of document.
const (
	KindRunList    = "RunList"
	KindRun        = "Run"
	KindValidation = "Validation"
	KindCheck      = "Check"
)

// Formats that -o takes: Table is the human form, the others a document.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// Formats lists what -o takes.
var Formats = []string{Table, JSON, YAML}

// TypeMeta names a document's schema.
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func typeMeta(kind string) TypeMeta { return TypeMeta{APIVersion: APIVersion, Kind: kind} }

// RunList is what runs list prints: the runs recorded here, oldest first.
type RunList struct {
	TypeMeta `json:",inline"`
	Items    []RunSummary `json:"items"`
}

// RunSummary is a run in a RunList, and the head of a Run.
type RunSummary struct {
	ID    string       `json:"id"`
	Flow  string       `json:"flow"`
	State record.State `json:"state"`
	// Start is absent for a run that has not started, End for one that has not
	// ended.
	Start *time.Time `json:"start,omitempty"`
	End   *time.Time `json:"end,omitempty"`
	// DurationSeconds is the time the run ran, to now while it goes on: from
	// Start to End, less the idle time between a runner's end and a resume;
	// absent when it has not started, or ended without a recorded end.
	DurationSeconds *float64 `json:"durationSeconds,omitempty"`
	// Runtime says what ran it: local (this machine), kube, argo or airflow.
	Runtime string `json:"runtime"`
	// Cluster is the API server's (or Airflow's) URL of a run elsewhere,
	// Context its kubeconfig context, Namespace where its pods ran and As what
	// they ran as (job or jobset).
	Cluster   string `json:"cluster,omitempty"`
	Context   string `json:"context,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	As        string `json:"as,omitempty"`
	// Error says why the run failed.
	Error string `json:"error,omitempty"`
}

// Run is what runs show prints: a run and each of its steps and foreach items.
type Run struct {
	TypeMeta   `json:",inline"`
	RunSummary `json:",inline"`
	// Params are the flow params the run was made with.
	Params map[string]string `json:"params,omitempty"`
	// Tasks are the run's steps, a foreach step's items one by one, in flow
	// order.
	Tasks []Task `json:"tasks"`
	// Artifacts are what the run's steps put, in flow order: with runs show
	// --artifacts only.
	Artifacts []Artifact `json:"artifacts,omitempty"`
}

// Artifact is an artifact a step (or a foreach item) of a run put.
type Artifact struct {
	Step string `json:"step"`
	// Index is the foreach item's that put it: absent for a step that runs
	// once.
	Index     *int   `json:"index,omitempty"`
	Name      string `json:"name"`
	SizeBytes int64  `json:"sizeBytes"`
	// Location is where it is kept: a path or an s3:// URL.
	Location string `json:"location"`
}

// Task is one step of a run, or one item of a foreach step.
type Task struct {
	Step string `json:"step"`
	// Index and Item are a foreach item's: absent for a step that runs once.
	Index *int         `json:"index,omitempty"`
	Item  string       `json:"item,omitempty"`
	State record.State `json:"state"`
	// Attempts counts the attempts made.
	Attempts int `json:"attempts"`
	// Stubbed says the task succeeded without running its program: its step
	// was stubbed (run --stub), a rehearsal.
	Stubbed         bool       `json:"stubbed,omitempty"`
	Start           *time.Time `json:"start,omitempty"`
	End             *time.Time `json:"end,omitempty"`
	DurationSeconds *float64   `json:"durationSeconds,omitempty"`
	// ExitCode is the last attempt's exit status, -1 when a signal ended it;
	// absent when no process ran.
	ExitCode *int `json:"exitCode,omitempty"`
	// Pods and Nodes are where the last attempt of a cluster run ran; Reason
	// the cluster's word for how it ended or why it waits (OOMKilled,
	// Unschedulable…).
	Pods   []string `json:"pods,omitempty"`
	Nodes  []string `json:"nodes,omitempty"`
	Reason string   `json:"reason,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Validation is what validate prints.
type Validation struct {
	TypeMeta `json:",inline"`
	Flow     string `json:"flow"`
	// OK says that validate exits 0: the flow is valid, and every target that
	// --target or --strict asks for can take it.
	OK bool `json:"ok"`
	// Valid says that the flow compiles; Errors say why not (with --strict,
	// the warnings too).
	Valid    bool      `json:"valid"`
	Errors   []Problem `json:"errors,omitempty"`
	Warnings []Problem `json:"warnings,omitempty"`
	// Steps and Targets are those of a valid flow.
	Steps   []Step   `json:"steps,omitempty"`
	Targets []Target `json:"targets,omitempty"`
}

// Problem is an error or a warning about the flow: the field it is about, as
// in steps[train].efa, and what is wrong and what to do.
type Problem struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Step is a step of a valid flow.
type Step struct {
	Name string `json:"name"`
	// Summary is the step's line in the table: what it waits for and needs.
	Summary string `json:"summary,omitempty"`
	// PodSecurity is the Pod Security level its pod meets (restricted,
	// baseline or privileged), and PodSecurityTodo, below restricted, which
	// option needs the level or would make the pod restricted.
	PodSecurity     string `json:"podSecurity"`
	PodSecurityTodo string `json:"podSecurityTodo,omitempty"`
}

// Target says whether a target can express the flow.
type Target struct {
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Required says that --target or --strict asks for the target.
	Required bool      `json:"required,omitempty"`
	Errors   []Problem `json:"errors,omitempty"`
}

// Check is what check prints: where each step can be placed on the cluster.
type Check struct {
	TypeMeta         `json:",inline"`
	placement.Report `json:",inline"`
}

// NewRunList returns the RunList of recs, as of now.
func NewRunList(recs []record.Record, now time.Time) RunList {
	l := RunList{TypeMeta: typeMeta(KindRunList), Items: []RunSummary{}}
	for i := range recs {
		l.Items = append(l.Items, summary(&recs[i], now))
	}
	return l
}

// NewRun returns the Run of rec and its tasks, as of now.
func NewRun(rec *record.Record, tasks []record.Task, now time.Time) Run {
	r := Run{TypeMeta: typeMeta(KindRun), RunSummary: summary(rec, now), Tasks: []Task{}}
	if len(rec.Params) > 0 {
		r.Params = maps.Clone(rec.Params)
		for k, v := range r.Params {
			r.Params[k] = credential.Redact(k, v)
		}
	}
	for _, t := range tasks {
		task := Task{
			Step: t.Step, Index: t.Index, Item: credential.Redact("", t.Item), State: t.State,
			Attempts: t.Attempts, Stubbed: t.Stubbed, ExitCode: t.ExitCode, Pods: t.Pods,
			Reason: credential.Redact("", t.Reason), Error: credential.Redact("", t.Error),
		}
		task.Start, task.End, task.DurationSeconds = times(t.State, t.Start, t.End, now)
		if t.Node != "" {
			task.Nodes = strings.Split(t.Node, ",")
		}
		r.Tasks = append(r.Tasks, task)
	}
	return r
}

// NewCheck returns the Check of r.
func NewCheck(r *placement.Report) Check { return Check{TypeMeta: typeMeta(KindCheck), Report: *r} }

// NewValidation returns a Validation of flow, to be filled in.
func NewValidation(flow string) Validation {
	return Validation{TypeMeta: typeMeta(KindValidation), Flow: flow}
}

func summary(rec *record.Record, now time.Time) RunSummary {
	s := RunSummary{
		ID: rec.ID, Flow: rec.Flow, State: rec.State, Runtime: rec.Runtime.Name(),
		Cluster: credential.Redact("", rec.Cluster), Context: rec.Context,
		Namespace: rec.Namespace, As: rec.As, Error: credential.Redact("", rec.Error),
	}
	s.Start, s.End, s.DurationSeconds = times(rec.State, rec.Start, rec.End, now)
	if s.DurationSeconds != nil {
		end := rec.End
		if end.IsZero() {
			end = now
		}
		s.DurationSeconds = seconds(rec.Took(end))
	}
	return s
}

// times returns start and end, absent when zero, and the seconds between
// them, or from start to now while state is not final.
func times(state record.State, start, end, now time.Time) (*time.Time, *time.Time, *float64) {
	var s, e *time.Time
	var d *float64
	if !start.IsZero() {
		s = &start
		switch {
		case !end.IsZero():
			d = seconds(end.Sub(start))
		case !state.Final():
			d = seconds(now.Sub(start))
		}
	}
	if !end.IsZero() {
		e = &end
	}
	return s, e, d
}

func seconds(d time.Duration) *float64 {
	s := d.Round(time.Millisecond).Seconds()
	return &s
}

// Write writes doc to w in format: JSON (indented) or YAML, made from the JSON.
func Write(w io.Writer, format string, doc any) error {
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	switch format {
	case JSON:
		data = append(data, '\n')
	case YAML:
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	default:
		return fmt.Errorf("output format %q: choose json or yaml", format)
	}
	_, err = w.Write(data)
	return err
}
