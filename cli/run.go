package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// ExitInterrupted is the status of a run stopped by SIGINT or SIGTERM (128 + SIGINT,
// as shells report it).
const ExitInterrupted = 130

// runCommand runs the flow; arg0 is this program's name, which the Run steps are
// started under.
func runCommand(flow *sdk.Flow, arg0 string) *ucli.Command {
	return &ucli.Command{
		Name:  "run",
		Usage: "run the flow on this machine (the default command), or on a cluster with --kube",
		Description: "Compiles the flow and runs its steps here, in dependency order, at most --max-parallel at once.\n" +
			"Run steps run through this program (`step NAME`), Command steps as processes of this machine,\n" +
			"each with its pod's environment plus MANIFOLD_RUN_DIR and MANIFOLD_ARTIFACTS. Everything a run\n" +
			"makes is kept in " + record.DefaultRoot + "/<run id>/: run.json, artifacts under <step>[/<index>]/, and\n" +
			"each step's state.json, stdout.log and stderr.log under _steps/<step>[/<index>]/.\n\n" +
			"A failed step stops the steps that wait for it; the others finish, and the run exits 1.\n" +
			"--run-id resumes a run: steps and items that succeeded are not run again, unless the step changed\n" +
			"since (its compiled spec, or for a Run step this program's build): a changed step runs again, with\n" +
			"every step that waits for it, and the run says which changed. Accelerators\n" +
			"(Neuron, EFA, GPUs) are reported and ignored; --strict refuses them instead.\n\n" +
			"A run that would start a Command step whose program this machine lacks (looked up in the PATH the\n" +
			"step gets) is refused before any step runs, naming the steps. --stub STEP rehearses the flow without\n" +
			"running STEP: its units succeed at once, and the live view, the run's summary, run.json and runs show\n" +
			"say they were stubbed. Resuming the run without --stub STEP runs STEP for real, and every step that\n" +
			"waits for it again.\n\n" +
			"With --kube the steps run on the cluster of the kubeconfig instead: each step is created exactly as\n" +
			"`compile --target job` (or, with --as jobset, `--target jobset`) emits it, labelled with the run\n" +
			"(" + plan.LabelFlow + ", " + plan.LabelRun + " and " + plan.LabelRunUID + ", by which alone it lists, watches and\n" +
			"deletes), once the steps it waits for have succeeded; the run follows them\n" +
			"through watches, streams their logs where the cluster serves them, reports pods the scheduler cannot\n" +
			"place after --pending-grace, and is recorded in " + record.DefaultRoot + "/<run id>/ like a local run.\n" +
			"Ctrl-C deletes everything the run created and waits until it is gone (Ctrl-C again stops waiting);\n" +
			"a run that succeeds is removed too, a failed one is left for inspection. --keep leaves everything.",
		Flags: runFlags(),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if err := checkKubeFlags(c); err != nil {
				return err
			}
			if c.Bool("kube") {
				return runOnKube(c, flow)
			}
			return runLocal(c, flow, arg0)
		},
	}
}

// runFlags are the run command's flags: its own, then the cluster's and the
// flow's.
func runFlags() []ucli.Flag {
	return append([]ucli.Flag{
		&ucli.IntFlag{Name: "max-parallel", Aliases: []string{"j"}, Value: runtime.NumCPU(), Usage: "run at most `N` step processes at once"},
		&ucli.StringFlag{Name: "run-id", Usage: "resume the run `ID` (or start a new run with that ID)"},
		&ucli.BoolFlag{Name: "strict", Usage: "refuse steps that ask for accelerators instead of ignoring the request"},
		&ucli.StringSliceFlag{Name: "stub", Usage: "rehearse the flow: step `STEP` succeeds without running its program, recorded and shown stubbed (repeatable)"},
	}, append(kubeFlags(), flowFlags()...)...)
}

// runOnKube runs the flow on the cluster of the kubeconfig (run --kube).
func runOnKube(c *ucli.Context, flow *sdk.Flow) error {
	if c.IsSet("stub") {
		return usageErr("--stub rehearses a run on this machine: leave it out with --kube")
	}
	p, err := load(c, flow)
	if err != nil {
		return err
	}
	if err := lint(c, p, false); err != nil {
		return err
	}
	return runKube(c, flow, p)
}

// runLocal runs the flow on this machine, its Run steps through this program
// (started as arg0), and gives the run's exit: 1 if it failed or --strict
// refused it, ExitInterrupted if it was interrupted.
func runLocal(c *ucli.Context, flow *sdk.Flow, arg0 string) error {
	if n := c.Int("max-parallel"); n < 1 {
		return usageErr("--max-parallel %d: give at least 1", n)
	}
	if id := c.String("run-id"); c.IsSet("run-id") {
		if err := runid.Check(id); err != nil {
			return usageErr("--run-id: %v", err)
		}
	}
	p, err := load(c, flow)
	if err != nil {
		return err
	}
	for _, step := range c.StringSlice("stub") {
		if err := local.CheckStub(p, step); err != nil {
			return usageErr("--stub %s: %v", step, err)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return invalidErr(fmt.Errorf("finding this program, which runs the Run steps: %w", err))
	}
	tracer, endTracing, err := startTracing(c)
	if err != nil {
		return err
	}
	defer endTracing()
	width, height, live := terminal(c.App.Writer)
	res, err := local.Run(c.Context, p, local.Options{
		RunID:       c.String("run-id"),
		MaxParallel: c.Int("max-parallel"),
		Strict:      c.Bool("strict"),
		Program:     exe,
		Arg0:        arg0,
		Stdout:      c.App.Writer,
		Stderr:      c.App.ErrWriter,
		Live:        live,
		Width:       width,
		Height:      height,
		Tracer:      tracer,
		Stub:        c.StringSlice("stub"),
	})
	var refused *local.RefusedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		fmt.Fprintf(c.App.ErrWriter, "flow %s cannot run locally with --strict:\n", p.Name)
		for _, e := range refused.Problems {
			fmt.Fprintln(c.App.ErrWriter, e.Error())
		}
		return silentInvalid
	case res != nil && res.State == record.Interrupted:
		return &exitError{code: ExitInterrupted, err: err}
	}
	return invalidErr(err)
}

// runState is a run's state as runs list shows it: "(stubbed)" follows the
// state of a run with stubbed steps, a rehearsal.
func runState(rec *record.Record) string {
	if len(rec.Stubbed()) > 0 {
		return string(rec.State) + " (stubbed)"
	}
	return string(rec.State)
}

// runSpan is how long a run ran, as runs list and runs show say it: span, of
// the time its runners ran it (record.Record.Took), without the time between a
// runner's end and a resume.
func runSpan(rec *record.Record) string {
	end := rec.End
	if end.IsZero() {
		end = time.Now()
	}
	return span(rec.State, end.Add(-rec.Took(end)), rec.End)
}

// terminal reports whether w is a terminal that can show the live view, and its
// size.
func terminal(w io.Writer) (width, height int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) || os.Getenv("TERM") == "dumb" {
		return 0, 0, false
	}
	width, height, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0, 0, false
	}
	return width, height, true
}
