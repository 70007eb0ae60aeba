package cli

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

func runsCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:        "runs",
		Usage:       "list the flow's runs, local or on a cluster, or show one",
		Subcommands: []*ucli.Command{runsListCommand(flow), runsShowCommand(flow)},
	}
}

// runsListCommand is `runs list`, which lists the flow's runs.
func runsListCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "list",
		Usage: "list the runs of the flow recorded here, oldest first",
		Flags: append([]ucli.Flag{
			&ucli.BoolFlag{Name: "all", Usage: "list the runs of every flow, not only " + flowName(flow)},
			outputFlag(),
		}, targetRunsFlags()...),
		Action: func(c *ucli.Context) error { return runsList(c, flow) },
	}
}

// runsList is the action of `runs list`: the runs recorded here (of the flow,
// or with --all of every flow), or with --target the flow's runs on the target.
func runsList(c *ucli.Context, flow *sdk.Flow) error {
	if err := noArgs(c); err != nil {
		return err
	}
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	if c.IsSet("target") {
		if c.IsSet("all") {
			return usageErr("runs list --all reads the local records; with --target it lists the flow's runs on the target")
		}
		return targetRunsList(c, flow)
	}
	runs, damaged, err := record.Scan(record.DefaultRoot)
	if err != nil {
		return invalidErr(err)
	}
	for _, err := range damaged {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", err)
	}
	runs = slices.DeleteFunc(runs, func(r record.Record) bool { return !c.Bool("all") && r.Flow != flowName(flow) })
	if format != output.Table {
		return output.Write(c.App.Writer, format, output.NewRunList(runs, time.Now()))
	}
	rows := [][]string{{"RUN", "FLOW", "STATE", "STARTED", "DURATION", "WHERE"}}
	for _, r := range runs {
		rows = append(rows, []string{r.ID, r.Flow, runState(&r), r.Start.Local().Format(time.DateTime), runSpan(&r), where(&r)})
	}
	return writeTable(c.App.Writer, rows)
}

// runsShowCommand is `runs show`, which shows one run.
func runsShowCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:      "show",
		Usage:     "show a run's steps: state, attempts, duration, exit status, error; and its artifacts",
		ArgsUsage: "RUN",
		Flags: append(append([]ucli.Flag{
			&ucli.BoolFlag{Name: "artifacts", Usage: "also list the artifacts the run's steps put: step, foreach item, name and size"},
			outputFlag(),
		}, storeFlags()...), targetRunsFlags()...),
		Action: func(c *ucli.Context) error { return runsShow(c, flow) },
	}
}

// runsShow is the action of `runs show`: the run recorded here, as a table or
// the document --output asks for, or with --target the run on the target.
func runsShow(c *ucli.Context, flow *sdk.Flow) error {
	if c.NArg() != 1 {
		return usageErr("runs show takes one run ID, got %d arguments (see runs list)", c.NArg())
	}
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	if c.IsSet("target") {
		if c.IsSet("artifacts") {
			return usageErr("runs show --artifacts reads the run's record: leave out --target (a run followed with --wait is recorded here)")
		}
		run := c.Args().First()
		return targetRunsShow(c, flow, run)
	}
	run, err := localRun(c, flow, c.Args().First())
	if err != nil {
		return invalidErr(err)
	}
	tasks := make([]record.Task, 0, len(run.Tasks()))
	for _, t := range run.Tasks() {
		tasks = append(tasks, t.Task)
	}
	if format != output.Table {
		doc := output.NewRun(&run.Record, tasks, time.Now())
		if c.Bool("artifacts") {
			if doc.Artifacts, err = runArtifacts(c, run); err != nil {
				return err
			}
		}
		return output.Write(c.App.Writer, format, doc)
	}
	if err := showRun(c.App.Writer, &run.Record, tasks); err != nil {
		return err
	}
	if c.Bool("artifacts") {
		return showArtifacts(c, run)
	}
	return nil
}

// runArtifacts lists the artifacts run's steps put, as runs show --output
// gives them.
func runArtifacts(c *ucli.Context, run *client.Run) ([]output.Artifact, error) {
	as, err := run.Artifacts(c.Context)
	if err != nil {
		return nil, invalidErr(err)
	}
	var out []output.Artifact
	for _, a := range as {
		var index *int
		if a.Index >= 0 {
			index = &a.Index
		}
		out = append(out, output.Artifact{Step: a.Step, Index: index, Name: a.Name, SizeBytes: a.Size, Location: a.Location})
	}
	return out, nil
}

// where says where a run ran: "local", or for a cluster run its kubeconfig
// context (or else its API server) and namespace.
func where(rec *record.Record) string {
	if rec.Runtime == record.Local {
		return rec.Runtime.Name()
	}
	w := cmp.Or(rec.Context, credential.Redact("", rec.Cluster), rec.Runtime.Name())
	if rec.Namespace != "" {
		w += "/" + rec.Namespace
	}
	return w
}

// showRun prints a run's record and tasks, every value through
// credential.Redact, as every output passes: a record may hold what looks like
// a credential (a param, a foreach item, an error quoting one).
func showRun(out io.Writer, rec *record.Record, tasks []record.Task) error {
	fmt.Fprintf(out, "run %s of flow %s: %s\n", rec.ID, rec.Flow, rec.State)
	if rec.Runtime != record.Local {
		fmt.Fprintln(out, clusterLine(rec))
	}
	if rec.Start.IsZero() {
		// A DAG run Airflow has queued and not started.
		fmt.Fprintln(out, "not started")
	} else {
		fmt.Fprintf(out, "started %s, took %s\n", rec.Start.Local().Format(time.DateTime), runSpan(rec))
	}
	var params []string
	for _, name := range slices.Sorted(maps.Keys(rec.Params)) {
		params = append(params, name+"="+credential.Redact(name, rec.Params[name]))
	}
	if len(params) > 0 {
		fmt.Fprintf(out, "params %s\n", strings.Join(params, " "))
	}
	if rec.Error != "" {
		fmt.Fprintf(out, "error: %s\n", credential.Redact("", rec.Error))
	}
	if stubbed := rec.Stubbed(); len(stubbed) > 0 {
		fmt.Fprintf(out, "stubbed, their programs not run: %s\n", strings.Join(stubbed, ", "))
	}
	fmt.Fprintln(out)
	// NODE and REASON are a cluster's; a column shows only when a task has it.
	nodes := slices.ContainsFunc(tasks, func(t record.Task) bool { return t.Node != "" })
	reasons := slices.ContainsFunc(tasks, func(t record.Task) bool { return t.Reason != "" })
	header := []string{"STEP", "ITEM", "STATE", "ATTEMPTS", "DURATION", "EXIT"}
	if nodes {
		header = append(header, "NODE")
	}
	if reasons {
		header = append(header, "REASON")
	}
	rows := [][]string{append(header, "ERROR")}
	for _, t := range tasks {
		exit := ""
		if t.ExitCode != nil {
			exit = strconv.Itoa(*t.ExitCode)
		}
		dur := ""
		if !t.Start.IsZero() {
			dur = span(t.State, t.Start, t.End)
		}
		row := []string{t.Label(), credential.Redact("", t.Item), t.Shown(), strconv.Itoa(t.Attempts), dur, exit}
		if nodes {
			row = append(row, t.Node)
		}
		if reasons {
			row = append(row, credential.Redact("", t.Reason))
		}
		rows = append(rows, append(row, credential.Redact("", t.Error)))
	}
	return writeTable(out, rows)
}

// clusterLine says where a cluster run ran: "on cluster URL (context C),
// namespace N, as job" ("on Airflow URL" for a run Airflow ran), leaving out
// what the record does not hold.
func clusterLine(rec *record.Record) string {
	line := "on cluster"
	if rec.Runtime == record.Airflow {
		line = "on Airflow"
	}
	if rec.Cluster != "" {
		line += " " + credential.Redact("", rec.Cluster)
	}
	if rec.Context != "" {
		line += " (context " + rec.Context + ")"
	}
	if rec.Namespace != "" {
		line += ", namespace " + rec.Namespace
	}
	if rec.As != "" {
		line += ", as " + rec.As
	}
	if rec.Runtime == record.Argo {
		line += ", run by Argo Workflows (Workflow " + rec.ID + ")"
	}
	return line
}

// span is the time from start to end, or to now while a run or step goes on.
func span(state record.State, start, end time.Time) string {
	switch {
	case end.IsZero() && state.Final():
		return "-"
	case end.IsZero():
		return human(time.Since(start).Round(time.Second)) + " so far"
	}
	d := end.Sub(start)
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return human(d.Round(100 * time.Millisecond))
}
