// Package cli is the command line of a flow program. A flow's main is one line:
//
//	func main() { cli.Main(flow) }
//
// and the program then runs, compiles, validates and draws that flow:
//
//	hello                       # run it on this machine (the same as `hello run`)
//	hello run --param name=you --max-parallel 4
//	hello run --kube --context kind-manifold   # run it on a cluster
//	hello runs list             # the runs, local and on clusters; `hello runs show RUN` shows one
//	hello resume RUN            # resume a failed run: what succeeded is not run again
//	hello compile --target job -o out/
//	hello validate --set train.efa=4
//	hello graph --format dot
//	hello step greet            # what a step's container runs
//	hello image build --push --tag registry.example.com/ml/hello:v1   # the program's image
//	hello check --context kind-manifold   # can the cluster's nodes take every step?
//	hello kind up --simulate trn1.32xlarge=2 --with jobset   # a laptop cluster with simulated Trainium nodes; kind load IMAGE, kind down
//	hello --version             # the program's module, manifold's version, Go, its commit
//	source <(hello completion bash)   # complete commands, flags, steps and run IDs (zsh, fish too)
//
// Flags go before or after a command's arguments; a word after "--" is an
// argument. A mistyped command or flag is answered with the closest name
// (package internal/suggest).
//
// run executes the flow with the local runtime (package runtimes/local): steps in
// dependency order, Run steps through `step NAME` of this same program, Command
// steps as processes, with a live view on a terminal and everything kept under
// .manifold/runs/<run id>/. run --kube runs it on a Kubernetes cluster instead (package
// runtimes/kube), recorded in the same place. image build builds this program
// into a container image without Docker (package image) and records its digest in
// .manifold/image.json, for compile --image-from-build. kind up|load|down makes,
// loads and removes a kind cluster on this machine whose workers can simulate
// accelerator instances (package provision/kind). run and run --kube send a
// trace of the run when the OTEL_* environment asks for one (package
// runtimes/tracing).
//
// Exit status: 0 on success, 1 when the flow (or its config) is invalid or a step
// fails, 2 when the command line is wrong, 130 when a run is interrupted.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	ucli "github.com/urfave/cli/v2"

	emittargets "github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/sdk"
)

// Exit statuses.
const (
	ExitOK      = 0
	ExitInvalid = 1
	ExitUsage   = 2
)

// targets are the emitters --target chooses from.
var targets = emittargets.All()

// Main runs the flow program's command line and exits with its status.
func Main(flow *sdk.Flow) {
	ctx, stop := interrupts()
	code := Run(ctx, flow, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Run runs the command line args (args[0] is the program name) for flow, writing to
// stdout and stderr, and returns the exit status.
func Run(ctx context.Context, flow *sdk.Flow, args []string, stdout, stderr io.Writer) int {
	if len(args) > 1 && args[len(args)-1] == completionFlag {
		complete(newApp(flow, args[0], stdout, stderr), flow, args, stdout)
		return ExitOK
	}
	if len(args) == 1 || len(args) > 1 && strings.HasPrefix(args[1], "-") && !helpFlag(args[1]) && !isVersionFlag(args[1]) {
		// No command: run the flow, with the flags given.
		args = append([]string{args[0], "run"}, args[1:]...)
	}
	arg0 := "flow"
	if len(args) > 0 {
		arg0 = args[0]
	}
	app := newApp(flow, arg0, stdout, stderr)
	err := app.RunContext(ctx, interspersed(app, args))
	var ex *exitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ex):
		if ex.err != nil {
			fmt.Fprintln(stderr, "error:", credential.RedactError(ex.err))
		}
		return ex.code
	default:
		fmt.Fprintln(stderr, "error:", credential.RedactError(err))
		return ExitUsage
	}
}

func isVersionFlag(arg string) bool { return arg == "--version" || arg == "-version" }

func helpFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

// exitError carries a status; err, when set, is printed as "error: …".
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func usageErr(format string, args ...any) error {
	return &exitError{code: ExitUsage, err: fmt.Errorf(format, args...)}
}

func invalidErr(err error) error { return &exitError{code: ExitInvalid, err: err} }

// silentInvalid is returned after the errors were printed one per line.
var silentInvalid = &exitError{code: ExitInvalid}

func newApp(flow *sdk.Flow, arg0 string, stdout, stderr io.Writer) *ucli.App {
	name := "flow"
	if flow != nil && flow.Name() != "" {
		name = flow.Name()
	}
	run := runCommand(flow, arg0)
	app := &ucli.App{
		Name:                      name,
		Usage:                     "compile, check and run the " + name + " flow",
		Writer:                    stdout,
		ErrWriter:                 stderr,
		HideVersion:               true,
		DisableSliceFlagSeparator: true,
		ExitErrHandler:            func(*ucli.Context, error) {},
		OnUsageError: func(c *ucli.Context, err error, _ bool) error {
			return usageError(c, err)
		},
		Commands: []*ucli.Command{
			run,
			resumeCommand(flow, run),
			runsCommand(flow),
			compileCommand(flow),
			validateCommand(flow),
			graphCommand(flow),
			stepCommand(flow),
			checkCommand(flow),
			imageCommand(flow),
			kindCommand(flow),
			artifactCommand(flow),
			logsCommand(flow),
		},
		Flags: []ucli.Flag{versionFlag()},
	}
	app.Commands = append(app.Commands, lifecycleCommands(flow)...)
	app.Commands = append(app.Commands, versionCommand(), completionCommand())
	addExamples(app, commandExamples(name, flow))
	for _, c := range app.Commands {
		c.OnUsageError = app.OnUsageError
		for _, sub := range c.Subcommands {
			sub.OnUsageError = app.OnUsageError
		}
		if len(c.Subcommands) > 0 && c.Action == nil {
			c.Action = subcommandsOnly
		}
	}
	app.Action = func(c *ucli.Context) error {
		if c.Bool("version") {
			return programVersion(app.Name).write(c.App.Writer)
		}
		if c.Args().Present() {
			return unknownCommand(app.Name, c.Args().First(), app.Commands)
		}
		return ucli.ShowAppHelp(c)
	}
	return app
}

// noArgs refuses stray arguments, which the command would otherwise leave
// unread.
func noArgs(c *ucli.Context) error {
	if c.Args().Present() {
		return usageErr("%s takes no arguments, got %q (see %s --help)", c.Command.Name, c.Args().Slice(), commandPath(c))
	}
	return nil
}

func targetNames() []string {
	names := emittargets.Names()
	sort.Strings(names)
	return names
}
