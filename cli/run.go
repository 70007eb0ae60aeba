package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/manifoldflow/manifold/runtimes/local"
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
		Usage: "run the flow on this machine (the default command)",
		Description: "Compiles the flow and runs its steps here, in dependency order, at most --max-parallel at once.\n" +
			"Run steps run through this program (`step NAME`), Command steps as processes of this machine,\n" +
			"each with its pod's environment plus MANIFOLD_RUN_DIR and MANIFOLD_ARTIFACTS. Everything a run\n" +
			"makes is kept in " + local.DefaultRoot + "/<run id>/: run.json, artifacts under <step>[/<index>]/, and\n" +
			"each step's state.json, stdout.log and stderr.log under _steps/<step>[/<index>]/.\n\n" +
			"A failed step stops the steps that wait for it; the others finish, and the run exits 1.\n" +
			"--run-id resumes a run: steps and items that succeeded are not run again. Accelerators\n" +
			"(Neuron, EFA, GPUs) are reported and ignored; --strict refuses them instead.",
		Flags: append([]ucli.Flag{
			&ucli.IntFlag{Name: "max-parallel", Aliases: []string{"j"}, Value: runtime.NumCPU(), Usage: "run at most `N` step processes at once"},
			&ucli.StringFlag{Name: "run-id", Usage: "resume the run `ID` (or start a new run with that ID)"},
			&ucli.BoolFlag{Name: "strict", Usage: "refuse steps that ask for accelerators instead of ignoring the request"},
		}, flowFlags()...),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			if n := c.Int("max-parallel"); n < 1 {
				return usageErr("--max-parallel %d: give at least 1", n)
			}
			if id := c.String("run-id"); c.IsSet("run-id") {
				if err := local.CheckRunID(id); err != nil {
					return usageErr("--run-id: %v", err)
				}
			}
			p, err := load(c, flow)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return invalidErr(fmt.Errorf("finding this program, which runs the Run steps: %w", err))
			}
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
			case res != nil && res.State == local.Interrupted:
				return &exitError{code: ExitInterrupted, err: err}
			}
			return invalidErr(err)
		},
	}
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
