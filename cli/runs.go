package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/sdk"
)

func runsCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "runs",
		Usage: "list the flow's local runs, or show one",
		Subcommands: []*ucli.Command{
			{
				Name:  "list",
				Usage: "list the local runs of the flow, oldest first",
				Flags: []ucli.Flag{
					&ucli.BoolFlag{Name: "all", Usage: "list the runs of every flow, not only " + flowName(flow)},
				},
				Action: func(c *ucli.Context) error {
					if err := noArgs(c); err != nil {
						return err
					}
					runs, err := local.List(local.DefaultRoot)
					if err != nil {
						return invalidErr(err)
					}
					rows := [][]string{{"RUN", "FLOW", "STATE", "STARTED", "DURATION"}}
					for _, r := range runs {
						if !c.Bool("all") && r.Flow != flowName(flow) {
							continue
						}
						rows = append(rows, []string{r.ID, r.Flow, string(r.State), r.Start.Local().Format(time.DateTime), span(r.State, r.Start, r.End)})
					}
					return writeTable(c.App.Writer, rows)
				},
			},
			{
				Name:      "show",
				Usage:     "show a run's steps: state, attempts, duration, exit status, error",
				ArgsUsage: "RUN",
				Action: func(c *ucli.Context) error {
					if c.NArg() != 1 {
						return usageErr("runs show takes one run ID, got %d arguments (see runs list)", c.NArg())
					}
					rec, tasks, err := local.Read(local.DefaultRoot, c.Args().First())
					if err != nil {
						return invalidErr(err)
					}
					return showRun(c.App.Writer, rec, tasks)
				},
			},
		},
	}
}

func showRun(out io.Writer, rec *local.Record, tasks []local.Task) error {
	fmt.Fprintf(out, "run %s of flow %s: %s\n", rec.ID, rec.Flow, rec.State)
	fmt.Fprintf(out, "started %s, took %s\n", rec.Start.Local().Format(time.DateTime), span(rec.State, rec.Start, rec.End))
	var params []string
	for _, name := range slices.Sorted(maps.Keys(rec.Params)) {
		params = append(params, name+"="+rec.Params[name])
	}
	if len(params) > 0 {
		fmt.Fprintf(out, "params %s\n", strings.Join(params, " "))
	}
	if rec.Error != "" {
		fmt.Fprintf(out, "error: %s\n", rec.Error)
	}
	fmt.Fprintln(out)
	rows := [][]string{{"STEP", "ITEM", "STATE", "ATTEMPTS", "DURATION", "EXIT", "ERROR"}}
	for _, t := range tasks {
		exit := ""
		if t.ExitCode != nil {
			exit = strconv.Itoa(*t.ExitCode)
		}
		dur := ""
		if !t.Start.IsZero() {
			dur = span(t.State, t.Start, t.End)
		}
		rows = append(rows, []string{t.Label(), t.Item, string(t.State), strconv.Itoa(t.Attempts), dur, exit, t.Error})
	}
	return writeTable(out, rows)
}

// span is the time from start to end, or to now while a run or step goes on.
func span(state local.State, start, end time.Time) string {
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
