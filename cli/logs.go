package cli

import (
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

func logsCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "logs",
		Usage: "print what a past run's steps wrote, from its record",
		Description: "Prints the standard output of the run's steps (or of STEP) to standard output and their\n" +
			"standard error to standard error, step by step in the flow's order. With several steps or\n" +
			"items each line starts with its label, as while the run went on. A cluster run's record keeps\n" +
			"its pods' output, each line already labelled, in one log.",
		ArgsUsage: "RUN [STEP]",
		Flags: append([]ucli.Flag{
			&ucli.IntFlag{Name: "index", Aliases: []string{"i"}, DefaultText: "every item", Usage: "only foreach item `N` of STEP (from 0)"},
			&ucli.IntFlag{Name: "attempt", DefaultText: "every attempt", Usage: "only what attempt `N` (from 1) of STEP wrote"},
		}, targetRunsFlags()...),
		Action: func(c *ucli.Context) error { return logs(c, flow) },
	}
}

// logs is the logs command's action: what the run's steps (or STEP, its item
// --index, its attempt --attempt) wrote, from the run's record here or with
// --target from the target.
func logs(c *ucli.Context, flow *sdk.Flow) error {
	if err := args(c, "logs", "RUN [STEP]", 1, 2); err != nil {
		return err
	}
	if c.IsSet("target") {
		run, step := c.Args().Get(0), c.Args().Get(1)
		return targetLogs(c, flow, run, step)
	}
	index, err := indexFlag(c)
	if err != nil {
		return err
	}
	if c.NArg() < 2 && (c.IsSet("index") || c.IsSet("attempt")) {
		return usageErr("logs: --index and --attempt choose within a step: name it, logs RUN STEP")
	}
	run, err := localRun(c, flow, c.Args().Get(0))
	if err != nil {
		return invalidErr(err)
	}
	tasks := run.Tasks()
	if c.NArg() == 2 {
		if tasks, err = stepTasks(run, c.Args().Get(1), index); err != nil {
			return err
		}
	}
	if c.IsSet("attempt") {
		return attemptLogs(c, run, tasks, c.Int("attempt"))
	}
	return taskLogs(c, run, tasks)
}

// stepTasks returns the tasks of run's step: its foreach item index, or every
// item when index is negative.
func stepTasks(run *client.Run, name string, index int) ([]*client.Task, error) {
	step := run.Step(name)
	if err := step.Err(); err != nil {
		return nil, invalidErr(err)
	}
	if index < 0 {
		return step.Tasks(), nil
	}
	t := step.Item(index)
	if err := t.Err(); err != nil {
		return nil, invalidErr(err)
	}
	return []*client.Task{t}, nil
}

// taskLogs prints what tasks wrote, standard output to standard output and
// standard error to standard error, each line labelled when the run is local
// and there are several tasks; it says so when they wrote nothing.
func taskLogs(c *ucli.Context, run *client.Run, tasks []*client.Task) error {
	// A cluster run's lines carry their label already.
	labelled := len(tasks) > 1 && run.Runtime == record.Local
	pad := 0
	for _, t := range tasks {
		pad = max(pad, utf8.RuneCountInString(t.Label()))
	}
	wrote := false
	for _, t := range tasks {
		label := ""
		if labelled {
			label = t.Label()
		}
		for _, log := range []struct {
			open func() (io.ReadCloser, error)
			w    io.Writer
		}{{t.OpenStdout, c.App.Writer}, {t.OpenStderr, c.App.ErrWriter}} {
			r, err := log.open()
			if err != nil {
				return invalidErr(err)
			}
			n, err := writeLog(log.w, label, pad, r)
			r.Close()
			if err != nil {
				return err
			}
			wrote = wrote || n > 0
		}
	}
	if !wrote {
		fmt.Fprintf(c.App.ErrWriter, "run %s: no output recorded\n", run.ID)
	}
	return nil
}

// attemptLogs prints what attempt n of the one task in tasks wrote.
func attemptLogs(c *ucli.Context, run *client.Run, tasks []*client.Task, n int) error {
	if len(tasks) != 1 {
		return usageErr("logs: --attempt needs one task, and step %s has %d foreach items: choose one with --index", tasks[0].Step, len(tasks))
	}
	t := tasks[0]
	if run.Runtime != record.Local {
		return invalidErr(fmt.Errorf("run %s ran on a cluster, whose record keeps the output of %s's attempts together: leave out --attempt", run.ID, t.Label()))
	}
	as, err := t.Attempts()
	if err != nil {
		return invalidErr(err)
	}
	if n < 1 || n > len(as) {
		return invalidErr(fmt.Errorf("run %s: %s made %s, not attempt %d", run.ID, t.Label(), display.Count(len(as), "attempt"), n))
	}
	if _, err := writeLog(c.App.Writer, "", 0, bytes.NewReader(as[n-1].Stdout)); err != nil {
		return err
	}
	_, err = writeLog(c.App.ErrWriter, "", 0, bytes.NewReader(as[n-1].Stderr))
	return err
}

// writeLog copies a log from r to w, each line prefixed with label when it is
// not "", as it reads it, and returns the bytes of the log.
func writeLog(w io.Writer, label string, pad int, r io.Reader) (int64, error) {
	if label == "" {
		return io.Copy(w, r)
	}
	return display.CopyPrefixed(w, r, label, pad)
}
