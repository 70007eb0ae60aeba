//go:build !manifold_image

package cli

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/airflow"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// airflowFlags are the flags of the lifecycle commands for --target airflow.
// Credentials are never flags: see runtimes/airflow.LoadConfig.
func airflowFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "airflow-url", Usage: "with --target airflow: the Airflow API server's `URL` (default: $" + airflow.EnvURL + ", then url in " + airflowConfigHint() + ")"},
		&ucli.StringFlag{Name: "dags-folder", Usage: "with --target airflow: the `DIR` of Airflow's DAG processor, as this machine reaches it (default: dags_folder in " + airflowConfigHint() + ")"},
		&ucli.BoolFlag{Name: "wait-parsed", Usage: "with --target airflow: wait until Airflow has imported the DAG, or print its import error"},
		&ucli.DurationFlag{Name: "parse-timeout", Value: 10 * time.Minute, Usage: "with --wait-parsed: give up after `DURATION`"},
		&ucli.BoolFlag{Name: "delete-dag", Usage: "with --target airflow: also delete the DAG and the record of its runs from Airflow"},
	}
}

// airflowConfigHint names the Airflow config file for usage text.
func airflowConfigHint() string {
	return "$" + airflow.EnvConfig + " or ~/.config/manifold/airflow.toml"
}

// airflowConfig is the Airflow config of the command line: the config file
// and environment, with --airflow-url and --dags-folder over them.
func airflowConfig(c *ucli.Context) (airflow.Config, error) {
	cfg, err := airflow.LoadConfig(airflow.ConfigPath())
	if err != nil {
		return cfg, usageErr("%v", err)
	}
	if u := c.String("airflow-url"); u != "" {
		cfg.URL = u
	}
	if d := c.String("dags-folder"); d != "" {
		cfg.DagsFolder = d
	}
	return cfg, nil
}

// airflowClient returns a client of the Airflow the command line names.
func airflowClient(c *ucli.Context) (*airflow.Client, error) {
	cfg, err := airflowConfig(c)
	if err != nil {
		return nil, err
	}
	cl, err := airflow.New(cfg)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return cl, nil
}

// airflowEngine is the engine of --target airflow: the Airflow the command
// line and the Airflow config name, and its dags folder.
type airflowEngine struct {
	c *ucli.Context
	// name is the program's, for the commands its refusals suggest.
	name string
}

func (e airflowEngine) Deploy(p *plan.Flow) error   { return airflowDeploy(e.c, p) }
func (e airflowEngine) Undeploy(p *plan.Flow) error { return airflowUndeploy(e.c, p) }
func (e airflowEngine) Trigger(p *plan.Flow, params map[string]string) error {
	return airflowTrigger(e.c, p, params)
}
func (e airflowEngine) Stop(p *plan.Flow, run string) error  { return airflowStop(e.c, p, run) }
func (e airflowEngine) Retry(p *plan.Flow, run string) error { return airflowRetry(e.c, p, run) }
func (e airflowEngine) List(p *plan.Flow) error              { return airflowRunsList(e.c, p) }
func (e airflowEngine) Show(p *plan.Flow, run string) error  { return airflowRunsShow(e.c, p, run) }
func (e airflowEngine) Logs(p *plan.Flow, run, step string) error {
	return airflowLogs(e.c, p, run, step)
}

// Suspend refuses: Airflow cannot suspend a run.
func (e airflowEngine) Suspend(*plan.Flow, string) error {
	return usageErr("suspend: Airflow cannot suspend a run; `%s stop --target airflow RUN` stops it, and `%s retry --target airflow RUN` runs its failed tasks again", e.name, e.name)
}

// Unsuspend refuses: Airflow has no suspended run.
func (e airflowEngine) Unsuspend(*plan.Flow, string) error {
	return usageErr("unsuspend: Airflow cannot suspend a run, so there is none to unsuspend; `%s retry --target airflow RUN` runs a failed run's tasks again", e.name)
}

// Latest is the run of p's DAG that started last.
func (e airflowEngine) Latest(p *plan.Flow) (string, error) {
	cl, id, err := airflowDAG(e.c, p)
	if err != nil {
		return "", err
	}
	run, err := cl.Latest(e.c.Context, id)
	if err != nil {
		return "", invalidErr(err)
	}
	return run, nil
}

// dagID is the id of p's DAG, as the airflow target names it.
func dagID(p *plan.Flow) (string, error) {
	id, err := airflow.DAGID(p)
	if err != nil {
		return "", invalidErr(err)
	}
	return id, nil
}

// dagsFolder is the dags folder of the command line, or a usage error.
func dagsFolder(c *ucli.Context) (string, error) {
	cfg, err := airflowConfig(c)
	if err != nil {
		return "", err
	}
	if cfg.DagsFolder == "" {
		return "", usageErr("--target airflow: give --dags-folder DIR (the dags folder of Airflow's DAG processor), or dags_folder in %s", airflowConfigHint())
	}
	return cfg.DagsFolder, nil
}

// airflowDeploy writes p's DAG into the dags folder, and with --wait-parsed
// waits until Airflow has imported it.
func airflowDeploy(c *ucli.Context, p *plan.Flow) error {
	dir, err := dagsFolder(c)
	if err != nil {
		return err
	}
	var cl *airflow.Client
	if c.Bool("wait-parsed") {
		// Credentials are checked before anything is written.
		if cl, err = airflowClient(c); err != nil {
			return err
		}
	}
	dep, err := airflow.Deploy(dir, p, c.Bool("take-over"))
	if err != nil {
		return invalidErr(err)
	}
	out := c.App.Writer
	for _, f := range dep.Files {
		fmt.Fprintf(out, "wrote %s\n", display.Rel(f))
	}
	if dep.Claims != nil {
		fmt.Fprintf(out, "the steps of %s claim devices: apply %s%s to the cluster (compile --target airflow writes it)\n", p.Name, p.Name, emit.ClaimsFileSuffix)
	}
	if cl == nil {
		fmt.Fprintf(out, "DAG %s deployed; Airflow imports it at its next parse (--wait-parsed waits for it)\n", dep.DAGID)
		return nil
	}
	fmt.Fprintf(out, "waiting for Airflow at %s to import DAG %s\n", cl.URL(), dep.DAGID)
	paused, err := cl.WaitImported(c.Context, dep, c.Duration("parse-timeout"))
	if err != nil {
		return invalidErr(err)
	}
	fmt.Fprintf(out, "Airflow imported DAG %s\n", dep.DAGID)
	if paused {
		fmt.Fprintf(out, "DAG %s is paused (Airflow pauses new DAGs): trigger unpauses it\n", dep.DAGID)
	}
	return nil
}

// airflowUndeploy removes the files deploy wrote, and with --delete-dag the
// DAG from Airflow.
func airflowUndeploy(c *ucli.Context, p *plan.Flow) error {
	dir, err := dagsFolder(c)
	if err != nil {
		return err
	}
	var cl *airflow.Client
	if c.Bool("delete-dag") {
		if cl, err = airflowClient(c); err != nil {
			return err
		}
	}
	removed, err := airflow.Undeploy(dir, p.Name)
	if err != nil {
		return invalidErr(err)
	}
	for _, f := range removed {
		fmt.Fprintf(c.App.Writer, "removed %s\n", display.Rel(f))
	}
	id, err := dagID(p)
	if err != nil {
		return err
	}
	if cl != nil {
		switch err := cl.DeleteDAG(c.Context, id); {
		case airflow.NotFound(err):
			fmt.Fprintf(c.App.Writer, "Airflow has no DAG %s\n", id)
		case err != nil:
			return invalidErr(err)
		default:
			fmt.Fprintf(c.App.Writer, "deleted DAG %s and its runs from Airflow\n", id)
		}
		return nil
	}
	if len(removed) == 0 {
		return invalidErr(fmt.Errorf("no DAG of flow %s in %s: nothing to undeploy", p.Name, dir))
	}
	return nil
}

// airflowTrigger starts a run of p's DAG with params (names of p's params,
// see triggerParams) as its conf, and with --wait follows it to its end.
func airflowTrigger(c *ucli.Context, p *plan.Flow, params map[string]string) error {
	all := airflow.RunParams(p, params)
	if err := checkOnInterrupt(c); err != nil {
		return err
	}
	cl, id, err := airflowDAG(c, p)
	if err != nil {
		return err
	}
	if stale, err := cl.Stale(c.Context, p); err == nil && stale {
		fmt.Fprintf(c.App.ErrWriter, "note: DAG %s in Airflow is not flow %s as it compiles now: deploy --target airflow runs the current one\n", id, p.Name)
	}
	runID := runid.New(time.Now())
	var tracer *tracing.Tracer
	var trace *tracing.Run
	if c.Bool("wait") {
		// A followed run is traced from its creation, so that its steps'
		// pods get its trace context (TRACEPARENT) from the run's conf.
		var endTracing func()
		tracer, endTracing, err = startTracing(c)
		if err != nil {
			return err
		}
		defer endTracing()
		trace = tracer.Begin(p, runID, string(record.Airflow))
	}
	run, unpaused, err := cl.Trigger(c.Context, id, runID, airflow.TriggerConf(params, trace.TraceParent()))
	if unpaused {
		fmt.Fprintf(c.App.Writer, "DAG %s was paused: unpaused it\n", id)
	}
	if err != nil {
		return invalidErr(err)
	}
	fmt.Fprintf(c.App.Writer, "triggered run %s of DAG %s\n", run.ID, id)
	if !c.Bool("wait") {
		fmt.Fprintf(c.App.Writer, "follow it with retry --target airflow %s; runs show --target airflow %s shows it\n", run.ID, run.ID)
		return nil
	}
	return followAirflowRun(c, cl, p, id, run.ID, all, tracer, trace)
}

// checkOnInterrupt refuses an --on-interrupt that names neither choice.
func checkOnInterrupt(c *ucli.Context) error {
	switch v := c.String("on-interrupt"); v {
	case "", interruptStop, interruptLeave:
		return nil
	default:
		return usageErr("--on-interrupt %q: choose %s (mark the run failed) or %s (let it go on)", v, interruptStop, interruptLeave)
	}
}

// airflowFollow follows run of DAG id with the live view, recorded and traced
// as run --kube runs are, and returns its result as an exit status.
func airflowFollow(c *ucli.Context, cl *airflow.Client, p *plan.Flow, id, run string, params map[string]string) error {
	tracer, endTracing, err := startTracing(c)
	if err != nil {
		return err
	}
	defer endTracing()
	return followAirflowRun(c, cl, p, id, run, params, tracer, nil)
}

// followAirflowRun is airflowFollow with tracer, continuing trace when the
// run's trace began at its trigger.
func followAirflowRun(c *ucli.Context, cl *airflow.Client, p *plan.Flow, id, run string, params map[string]string, tracer *tracing.Tracer, trace *tracing.Run) error {
	width, height, live := terminal(c.App.Writer)
	res, err := cl.Follow(c.Context, p, id, run, airflow.FollowOptions{
		Params: params,
		Stdout: c.App.Writer, Stderr: c.App.ErrWriter,
		Live: live, Width: width, Height: height,
		Tracer:      tracer,
		Trace:       trace,
		OnInterrupt: func() bool { return stopOnInterrupt(c, run) },
	})
	switch {
	case err == nil:
		return nil
	case res != nil && res.State == record.Interrupted:
		if !res.Stopped {
			fmt.Fprintf(c.App.ErrWriter, "run %s goes on in Airflow: stop it with stop --target airflow %s\n", run, run)
		}
		return &exitError{code: ExitInterrupted, err: err}
	}
	return invalidErr(err)
}

// stopOnInterrupt says whether an interrupted follow stops the run: as
// --on-interrupt says, else as the user answers on a terminal, else not.
func stopOnInterrupt(c *ucli.Context, run string) bool {
	switch c.String("on-interrupt") {
	case interruptStop:
		return true
	case interruptLeave:
		return false
	}
	in, ok := c.App.Reader.(*os.File)
	if c.App.Reader == nil {
		in, ok = os.Stdin, true
	}
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return false
	}
	fmt.Fprintf(c.App.ErrWriter, "\nstop run %s in Airflow (mark it failed)? [y/N] ", run)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(answer)), "y")
}

// airflowListed is how many runs runs list --target airflow shows: the last.
const airflowListed = 50

// airflowRunsList lists the last runs of p's DAG.
func airflowRunsList(c *ucli.Context, p *plan.Flow) error {
	cl, id, err := airflowDAG(c, p)
	if err != nil {
		return err
	}
	runs, err := cl.Runs(c.Context, id, airflowListed)
	if err != nil {
		return invalidErr(err)
	}
	if format := c.String("output"); format != output.Table {
		recs := make([]record.Record, len(runs))
		for i := range runs {
			recs[i] = *cl.Record(p, &runs[i])
		}
		return output.Write(c.App.Writer, format, output.NewRunList(recs, time.Now()))
	}
	rows := [][]string{{"RUN", "STATE", "STARTED", "DURATION", "TYPE"}}
	for _, r := range runs {
		rec := cl.Record(p, &r)
		started := ""
		if !rec.Start.IsZero() {
			started = rec.Start.Local().Format(time.DateTime)
		}
		dur := ""
		if !rec.Start.IsZero() {
			dur = span(rec.State, rec.Start, rec.End)
		}
		rows = append(rows, []string{r.ID, string(rec.State), started, dur, r.RunType})
	}
	return writeTable(c.App.Writer, rows)
}

// airflowDAG returns the client of the Airflow the flags name and the id of
// p's DAG there.
func airflowDAG(c *ucli.Context, p *plan.Flow) (*airflow.Client, string, error) {
	cl, err := airflowClient(c)
	if err != nil {
		return nil, "", err
	}
	id, err := dagID(p)
	if err != nil {
		return nil, "", err
	}
	return cl, id, nil
}

// airflowRunsShow shows a run of p's DAG as Airflow has it: its steps'
// tasks, their states and tries.
func airflowRunsShow(c *ucli.Context, p *plan.Flow, run string) error {
	cl, id, err := airflowDAG(c, p)
	if err != nil {
		return err
	}
	r, err := cl.Run(c.Context, id, run)
	if err != nil {
		return invalidErr(err)
	}
	tis, err := cl.TaskInstances(c.Context, id, run)
	if err != nil {
		return invalidErr(err)
	}
	if format := c.String("output"); format != output.Table {
		return output.Write(c.App.Writer, format, output.NewRun(cl.Record(p, r), airflow.Tasks(p, tis), time.Now()))
	}
	return showRun(c.App.Writer, cl.Record(p, r), airflow.Tasks(p, tis))
}

// airflowLogs prints the logs of run's tasks from Airflow, of every try (or
// --attempt's), step by step in the flow's order.
func airflowLogs(c *ucli.Context, p *plan.Flow, run, step string) error {
	if step != "" && p.Step(step) == nil {
		return usageErr("logs: flow %s has no step %s", p.Name, step)
	}
	cl, id, err := airflowDAG(c, p)
	if err != nil {
		return err
	}
	index := -1
	if c.IsSet("index") {
		index = c.Int("index")
	}
	var attempt *int
	if c.IsSet("attempt") {
		n := c.Int("attempt")
		attempt = &n
	}
	logs, err := cl.Logs(c.Context, p, id, run, step, index, attempt)
	if err != nil {
		return invalidErr(err)
	}
	labelled := len(logs.Tasks) > 1
	pad := 0
	for _, t := range logs.Tasks {
		pad = max(pad, len(t.Label()))
	}
	wrote := false
	for l, err := range logs.Each(c.Context) {
		if err != nil {
			return invalidErr(err)
		}
		label := ""
		if labelled {
			label = l.Task
		}
		if _, err := writeLog(c.App.Writer, label, pad, strings.NewReader(l.Text)); err != nil {
			return err
		}
		wrote = wrote || l.Text != ""
	}
	if !wrote {
		fmt.Fprintf(c.App.ErrWriter, "run %s: no task has run yet\n", run)
	}
	return nil
}

// airflowStop marks a run failed.
func airflowStop(c *ucli.Context, p *plan.Flow, run string) error {
	cl, id, err := airflowDAG(c, p)
	if err != nil {
		return err
	}
	if err := cl.StopRun(c.Context, id, run); err != nil {
		return invalidErr(err)
	}
	fmt.Fprintf(c.App.Writer, "marked run %s of DAG %s failed: Airflow fails its running tasks, whose pods are deleted as their workers stop them, and skips the tasks not started (retry %s runs the failed ones again)\n", run, id, run)
	return nil
}

// airflowRetry clears the failed tasks of a run and those after them, so
// Airflow runs them again in the same run, and follows it again, in the same
// record. A run that has not ended is followed again as it is.
func airflowRetry(c *ucli.Context, p *plan.Flow, run string) error {
	if err := checkOnInterrupt(c); err != nil {
		return err
	}
	cl, id, err := airflowDAG(c, p)
	if err != nil {
		return err
	}
	r, labels, err := cl.Retry(c.Context, p, id, run)
	if err != nil {
		return invalidErr(err)
	}
	if labels == nil {
		fmt.Fprintf(c.App.Writer, "run %s is %s in Airflow: following it (nothing to clear)\n", run, airflow.RunState(r.State))
	} else {
		fmt.Fprintf(c.App.Writer, "cleared %s of run %s: %s\n", display.Count(len(labels), "task"), run, strings.Join(labels, ", "))
	}
	return airflowFollow(c, cl, p, id, run, cl.Record(p, r).Params)
}
