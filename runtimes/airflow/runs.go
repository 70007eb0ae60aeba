package airflow

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// The states of a DAG run.
const (
	RunQueued  = "queued"
	RunRunning = "running"
	RunSuccess = "success"
	RunFailed  = "failed"
)

// DAGRun is what the API says of a DAG run.
type DAGRun struct {
	ID        string            `json:"dag_run_id"`
	DAGID     string            `json:"dag_id"`
	State     string            `json:"state"`
	RunType   string            `json:"run_type"`
	QueuedAt  *time.Time        `json:"queued_at"`
	StartDate *time.Time        `json:"start_date"`
	EndDate   *time.Time        `json:"end_date"`
	RunAfter  time.Time         `json:"run_after"`
	Conf      map[string]any    `json:"conf"`
	Note      *string           `json:"note"`
	Versions  []json.RawMessage `json:"dag_versions"`
}

// Final reports whether the run has ended.
func (r *DAGRun) Final() bool { return r.State == RunSuccess || r.State == RunFailed }

// TaskInstance is one try of a task (of one map index of a mapped task) in a
// DAG run, as the API last saw it.
type TaskInstance struct {
	TaskID    string     `json:"task_id"`
	MapIndex  int        `json:"map_index"`
	State     *string    `json:"state"`
	TryNumber int        `json:"try_number"`
	MaxTries  int        `json:"max_tries"`
	StartDate *time.Time `json:"start_date"`
	EndDate   *time.Time `json:"end_date"`
	Hostname  *string    `json:"hostname"`
	// RenderedMapIndex names a mapped task's item when the DAG gives it one.
	RenderedMapIndex *string `json:"rendered_map_index"`
}

// StateName is the task instance's state, "none" before the scheduler has
// given it one.
func (ti *TaskInstance) StateName() string {
	if ti.State == nil || *ti.State == "" {
		return "none"
	}
	return *ti.State
}

// Trigger starts a run of DAG id named runID (Airflow names it when "") with
// conf, now: no logical date, so runs of the same DAG never collide. A paused
// DAG is unpaused first, since its runs would wait otherwise; unpaused says so.
func (c *Client) Trigger(ctx context.Context, id, runID string, conf map[string]string) (run *DAGRun, unpaused bool, err error) {
	d, err := c.DAG(ctx, id)
	if NotFound(err) {
		return nil, false, fmt.Errorf("Airflow has no DAG %s: deploy it first (deploy --target airflow --wait-parsed)", id)
	}
	if err != nil {
		return nil, false, err
	}
	if d.IsPaused {
		if err := c.Pause(ctx, id, false); err != nil {
			return nil, false, fmt.Errorf("unpausing DAG %s: %w", id, err)
		}
		unpaused = true
	}
	body := map[string]any{"logical_date": nil}
	if runID != "" {
		body["dag_run_id"] = runID
	}
	if conf == nil {
		conf = map[string]string{}
	}
	body["conf"] = conf
	var r DAGRun
	if err := c.call(ctx, http.MethodPost, path("dags", id, "dagRuns"), nil, body, &r); err != nil {
		return nil, unpaused, err
	}
	return &r, unpaused, nil
}

// Run returns run runID of DAG id.
func (c *Client) Run(ctx context.Context, id, runID string) (*DAGRun, error) {
	var r DAGRun
	if err := c.call(ctx, http.MethodGet, path("dags", id, "dagRuns", runID), nil, nil, &r); err != nil {
		if NotFound(err) {
			return nil, fmt.Errorf("DAG %s has no run %s in Airflow (runs list --target airflow lists them): %w", id, runID, err)
		}
		return nil, err
	}
	return &r, nil
}

// Runs returns the last limit runs of DAG id, oldest first.
func (c *Client) Runs(ctx context.Context, id string, limit int) ([]DAGRun, error) {
	var out struct {
		Runs []DAGRun `json:"dag_runs"`
	}
	q := url.Values{"limit": {strconv.Itoa(limit)}, "order_by": {"-run_after"}}
	if err := c.call(ctx, http.MethodGet, path("dags", id, "dagRuns"), q, nil, &out); err != nil {
		return nil, err
	}
	for i, j := 0, len(out.Runs)-1; i < j; i, j = i+1, j-1 {
		out.Runs[i], out.Runs[j] = out.Runs[j], out.Runs[i]
	}
	return out.Runs, nil
}

// pageSize is how many task instances a request asks for.
const pageSize = 100

// TaskInstances returns every task instance of run runID of DAG id, a mapped
// task's one per map index once it has expanded.
func (c *Client) TaskInstances(ctx context.Context, id, runID string) ([]TaskInstance, error) {
	var all []TaskInstance
	for offset := 0; ; offset += pageSize {
		var out struct {
			TIs   []TaskInstance `json:"task_instances"`
			Total *int           `json:"total_entries"`
		}
		q := url.Values{"limit": {strconv.Itoa(pageSize)}, "offset": {strconv.Itoa(offset)}, "order_by": {"map_index"}}
		if err := c.call(ctx, http.MethodGet, path("dags", id, "dagRuns", runID, "taskInstances"), q, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.TIs...)
		if len(out.TIs) < pageSize || out.Total != nil && len(all) >= *out.Total {
			return all, nil
		}
	}
}

// Stop marks run runID of DAG id failed. Airflow then marks its running tasks
// failed, and their workers stop them (the pod operator deletes its pod as
// it is killed), and its tasks not yet started skipped.
func (c *Client) Stop(ctx context.Context, id, runID string) (*DAGRun, error) {
	var r DAGRun
	if err := c.call(ctx, http.MethodPatch, path("dags", id, "dagRuns", runID), url.Values{"update_mask": {"state"}}, map[string]string{"state": RunFailed}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Clear clears the failed task instances of run runID of DAG id, and those
// downstream of them (upstream_failed), so the scheduler runs them again in
// the same run, which it sets queued again, at the DAG's latest version. It
// returns the task instances cleared.
func (c *Client) Clear(ctx context.Context, id, runID string) ([]TaskInstance, error) {
	body := map[string]any{
		"dry_run":            false,
		"only_failed":        true,
		"dag_run_id":         runID,
		"include_downstream": true,
		"reset_dag_runs":     true,
		// A flow deployed again since (its fix) runs at its new version.
		"run_on_latest_version": true,
	}
	var out struct {
		TIs []TaskInstance `json:"task_instances"`
	}
	if err := c.call(ctx, http.MethodPost, path("dags", id, "clearTaskInstances"), nil, body, &out); err != nil {
		return nil, err
	}
	return out.TIs, nil
}

// TaskLog is the log of one try of a task.
type TaskLog struct {
	// Lines are its messages, one a line (an exception's on the lines that
	// follow its message, indented).
	Lines []string
	// Exception is the last exception it reports, "Type: message", with
	// what the pod operator appends to its message (the whole pod) left out;
	// "" when it reports none.
	Exception string
	// short holds Lines with the pod operator's pod dumps left out.
	short []string
}

// Text is the whole log.
func (l *TaskLog) Text() string {
	if len(l.Lines) == 0 {
		return ""
	}
	return strings.Join(l.Lines, "\n") + "\n"
}

// Tail is the last n lines of the log, without the pods the pod operator
// prints whole in its exceptions.
func (l *TaskLog) Tail(n int) []string {
	if len(l.short) > n {
		return l.short[len(l.short)-n:]
	}
	return l.short
}

// podDump begins what the pod operator appends to the message of a pod's
// failure: the whole pod.
const podDump = "\nremote_pod:"

// Log returns the log of try try of task taskID (map index mapIndex, -1 for a
// task that is not mapped) in run runID of DAG id.
func (c *Client) Log(ctx context.Context, id, runID, taskID string, mapIndex, try int) (*TaskLog, error) {
	var out struct {
		Content []json.RawMessage `json:"content"`
	}
	q := url.Values{"full_content": {"true"}, "map_index": {strconv.Itoa(mapIndex)}}
	if err := c.call(ctx, http.MethodGet, path("dags", id, "dagRuns", runID, "taskInstances", taskID, "logs", strconv.Itoa(try)), q, nil, &out); err != nil {
		return nil, err
	}
	l := &TaskLog{}
	for _, raw := range out.Content {
		l.add(raw)
	}
	return l, nil
}

// add adds one message of a task's log: a plain string, or a structured
// message as "timestamp LEVEL event", and the exceptions it carries.
func (l *TaskLog) add(raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		l.Lines, l.short = append(l.Lines, s), append(l.short, s)
		return
	}
	var m struct {
		Timestamp string `json:"timestamp"`
		Level     string `json:"level"`
		Event     string `json:"event"`
		Error     []struct {
			ExcType  string `json:"exc_type"`
			ExcValue string `json:"exc_value"`
		} `json:"error_detail"`
	}
	if json.Unmarshal(raw, &m) != nil {
		l.Lines, l.short = append(l.Lines, string(raw)), append(l.short, string(raw))
		return
	}
	var parts []string
	for _, p := range []string{m.Timestamp, strings.ToUpper(m.Level), m.Event} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	line := strings.Join(parts, " ")
	l.Lines, l.short = append(l.Lines, line), append(l.short, line)
	for _, e := range m.Error {
		full := "  " + e.ExcType + ": " + strings.ReplaceAll(e.ExcValue, "\n", "\n    ")
		l.Lines = append(l.Lines, strings.Split(full, "\n")...)
		value, dumped := e.ExcValue, e.ExcValue
		if i := strings.Index(value, podDump); i >= 0 {
			value, dumped = value[:i], value[:i]+" (the pod follows in the full log)"
		}
		l.short = append(l.short, strings.Split("  "+e.ExcType+": "+strings.ReplaceAll(dumped, "\n", "\n    "), "\n")...)
		l.Exception = e.ExcType + ": " + strings.Join(strings.Fields(strings.ReplaceAll(value, "\n", " ")), " ")
	}
}

// RunState is the record state of a DAG run state.
func RunState(state string) record.State {
	switch state {
	case RunSuccess:
		return record.Succeeded
	case RunFailed:
		return record.Failed
	case RunRunning:
		return record.Running
	}
	return record.Pending
}

// TaskState is the record state of a task instance state.
func TaskState(state string) record.State {
	switch state {
	case "success":
		return record.Succeeded
	case "failed", "upstream_failed":
		return record.Failed
	case "up_for_retry":
		return record.Retrying
	case "running", "restarting", "deferred", "up_for_reschedule", "awaiting_input":
		return record.Running
	case "queued":
		return record.Queued
	case "skipped", "removed":
		return record.Skipped
	}
	return record.Pending
}

// Label names a task instance of f's DAG as the record names its unit: its
// step, with [index] for a foreach item; a multi-node step's Service tasks by
// their own task id.
func Label(f *plan.Flow, ti TaskInstance) string {
	step, mine := stepOfTask(f, ti.TaskID)
	if !mine {
		return ti.TaskID
	}
	if ti.MapIndex >= 0 {
		return step + "[" + strconv.Itoa(ti.MapIndex) + "]"
	}
	return step
}

// Tasks are the task instances of a run of f's DAG as record tasks, in the
// flow's order: a step's own task (each map index of a foreach step's), its
// tries as attempts. The Service tasks of a multi-node step are left out.
func Tasks(f *plan.Flow, tis []TaskInstance) []record.Task {
	var out []record.Task
	for i := range f.Steps {
		s := &f.Steps[i]
		for _, ti := range tis {
			if ti.TaskID != s.Name || (s.Foreach != nil) != (ti.MapIndex >= 0) {
				continue
			}
			t := record.Task{Step: s.Name, State: TaskState(ti.StateName()), Attempts: ti.TryNumber}
			if ti.MapIndex >= 0 {
				t.Index = new(ti.MapIndex)
				if ti.MapIndex < len(s.Foreach) {
					t.Item = s.Foreach[ti.MapIndex]
				}
			}
			if ti.StartDate != nil {
				t.Start = *ti.StartDate
			}
			if ti.EndDate != nil {
				t.End = *ti.EndDate
			}
			if st := ti.StateName(); st != "success" && st != "none" && st != "running" {
				t.Reason = st
			}
			out = append(out, t)
		}
	}
	return out
}
