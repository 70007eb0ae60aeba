package airflow

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"time"

	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// DAGID is the id of f's DAG, as the airflow target names it; the error is
// the flow's errors that stop its DAG being built.
func DAGID(f *plan.Flow) (string, error) {
	d, errs := emitairflow.Build(f)
	if len(errs) > 0 {
		return "", errs.ToAggregate()
	}
	return d.ID, nil
}

// WaitImported waits, up to timeout, until Airflow has imported the DAG that
// dep deployed (see WaitParsed), and says whether the DAG is paused, as
// Airflow pauses new DAGs; a DAG it cannot read back is not said paused.
func (c *Client) WaitImported(ctx context.Context, dep *Deployed, timeout time.Duration) (paused bool, err error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.WaitParsed(wctx, dep); err != nil {
		return false, err
	}
	d, err := c.DAG(ctx, dep.DAGID)
	return err == nil && d.IsPaused, nil
}

// RunParams are the params of a run of f triggered with params: every param
// of f, at its value unless params gives another.
func RunParams(f *plan.Flow, params map[string]string) map[string]string {
	all := map[string]string{}
	for _, prm := range f.Params {
		all[prm.Name] = prm.Value
	}
	maps.Copy(all, params)
	return all
}

// TriggerConf is the conf Trigger gives a run of params: params, with the
// trace context traceParent its steps continue (emit/airflow.ConfTraceParent)
// when it is not "". It is nil when both are empty.
func TriggerConf(params map[string]string, traceParent string) map[string]string {
	conf := maps.Clone(params)
	if traceParent != "" {
		if conf == nil {
			conf = map[string]string{}
		}
		conf[emitairflow.ConfTraceParent] = traceParent
	}
	return conf
}

// Latest returns the id of the run of DAG id that started last, the last
// that Runs lists.
func (c *Client) Latest(ctx context.Context, id string) (string, error) {
	runs, err := c.Runs(ctx, id, 1)
	if err != nil {
		return "", err
	}
	if len(runs) == 0 {
		return "", fmt.Errorf("no run of DAG %s in Airflow at %s: trigger one first", id, c.URL())
	}
	return runs[len(runs)-1].ID, nil
}

// Record is run r of DAG of f as a run record of runtime "airflow": its
// params are its conf, without the trace context its trigger gave the steps.
func (c *Client) Record(f *plan.Flow, r *DAGRun) *record.Record {
	rec := &record.Record{Flow: f.Name, ID: r.ID, State: RunState(r.State), Runtime: record.Airflow, Cluster: c.URL(), Params: map[string]string{}}
	if r.StartDate != nil {
		rec.Start = *r.StartDate
	}
	if r.EndDate != nil {
		rec.End = *r.EndDate
	}
	for k, v := range r.Conf {
		if k == emitairflow.ConfTraceParent {
			continue // the trace context its trigger gave the steps, not a param
		}
		if s, ok := v.(string); ok {
			rec.Params[k] = s
		} else {
			rec.Params[k] = fmt.Sprint(v)
		}
	}
	return rec
}

// StopRun marks run runID of DAG id failed (see Stop), refusing a run that
// has already ended.
func (c *Client) StopRun(ctx context.Context, id, runID string) error {
	r, err := c.Run(ctx, id, runID)
	if err != nil {
		return err
	}
	if r.Final() {
		return fmt.Errorf("run %s of DAG %s has already ended: %s", runID, id, r.State)
	}
	_, err = c.Stop(ctx, id, runID)
	return err
}

// Retry clears the failed tasks of run runID of DAG id, f's, and those after
// them (see Clear), so that Airflow runs them again in the same run, and
// returns the run as it was and the labels of the tasks cleared. A run that
// has not ended is left as it is, with no labels; one that ended with no
// failed task is refused.
func (c *Client) Retry(ctx context.Context, f *plan.Flow, id, runID string) (*DAGRun, []string, error) {
	r, err := c.Run(ctx, id, runID)
	if err != nil || !r.Final() {
		return r, nil, err
	}
	cleared, err := c.Clear(ctx, id, runID)
	if err != nil {
		return r, nil, err
	}
	if len(cleared) == 0 {
		return r, nil, fmt.Errorf("run %s of DAG %s has no failed task to retry (it %s)", runID, id, RunState(r.State))
	}
	var labels []string
	for _, ti := range cleared {
		if l := Label(f, ti); !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	return r, labels, nil
}

// RunLogs are the tasks of a run whose logs Logs reads.
type RunLogs struct {
	// Tasks are the tasks picked, in the flow's order.
	Tasks   []record.Task
	c       *Client
	id, run string
	byLabel map[string]TaskInstance
	attempt *int
}

// TryLog is the log of one try of a task.
type TryLog struct {
	// Task is the task's label.
	Task string
	// Text is the log, headed by "--- try N" when the task's logs are of
	// several tries.
	Text string
}

// Logs picks the tasks of run runID of DAG id, f's, whose logs to read: those
// of step (every step when "") and of item index (every item when < 0), of
// try *attempt (every try when nil).
func (c *Client) Logs(ctx context.Context, f *plan.Flow, id, runID, step string, index int, attempt *int) (*RunLogs, error) {
	if _, err := c.Run(ctx, id, runID); err != nil {
		return nil, err
	}
	tis, err := c.TaskInstances(ctx, id, runID)
	if err != nil {
		return nil, err
	}
	l := &RunLogs{c: c, id: id, run: runID, byLabel: map[string]TaskInstance{}, attempt: attempt}
	for _, ti := range tis {
		l.byLabel[Label(f, ti)] = ti
	}
	for _, t := range Tasks(f, tis) {
		if step != "" && t.Step != step || index >= 0 && (t.Index == nil || *t.Index != index) {
			continue
		}
		l.Tasks = append(l.Tasks, t)
	}
	return l, nil
}

// Each reads the logs of the picked tasks' tries in turn, task by task; a
// task that has not run has none. It ends at the first error: a try asked
// for that the task did not make, or one Airflow does not answer.
func (l *RunLogs) Each(ctx context.Context) iter.Seq2[TryLog, error] {
	return func(yield func(TryLog, error) bool) {
		for _, t := range l.Tasks {
			ti, ok := l.byLabel[t.Label()]
			if !ok || ti.TryNumber == 0 {
				continue
			}
			tries := make([]int, 0, ti.TryNumber)
			for n := 1; n <= ti.TryNumber; n++ {
				tries = append(tries, n)
			}
			if l.attempt != nil {
				n := *l.attempt
				if n < 1 || n > ti.TryNumber {
					yield(TryLog{}, fmt.Errorf("run %s: %s made %s, not attempt %d", l.run, t.Label(), display.Count(ti.TryNumber, "try"), n))
					return
				}
				tries = []int{n}
			}
			for _, n := range tries {
				log, err := l.c.Log(ctx, l.id, l.run, ti.TaskID, ti.MapIndex, n)
				if err != nil {
					yield(TryLog{}, err)
					return
				}
				text := log.Text()
				if len(tries) > 1 {
					text = "--- try " + strconv.Itoa(n) + "\n" + text
				}
				if !yield(TryLog{Task: t.Label(), Text: text}, nil) {
					return
				}
			}
		}
	}
}
