//go:build !manifold_image

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// lifecycleCommands are the commands that deploy the flow to Argo Workflows or
// Airflow, run it there and manage its runs.
func lifecycleCommands(flow *sdk.Flow) []*ucli.Command {
	return append([]*ucli.Command{deployCommand(flow), undeployCommand(flow), triggerCommand(flow)}, runCommands(flow)...)
}

// deployCommand is deploy: the flow put on the engine.
func deployCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "deploy",
		Usage: "deploy the flow to Argo Workflows or Airflow, where trigger runs it",
		Description: "With --target argo, applies server-side (field manager manifold) everything compile --target argo\n" +
			"writes for the flow: its WorkflowTemplate, the CronWorkflow of a schedule, the ConfigMap of its\n" +
			"literals and its ResourceClaimTemplates, labelled manifold.dev/flow and manifold.dev/deploy=argo.\n" +
			"A changed flow is updated in place, and an object the flow no longer makes is deleted.\n" +
			"--dry-run=server has the API server check everything and change nothing.\n\n" +
			"Deploy touches only what it made: an object of a name it applies without those labels (argo),\n" +
			"or a DAG file of the flow's name it did not write (airflow), is refused, naming it (and, on argo,\n" +
			"its field managers); --take-over applies over it and makes it the flow's, for undeploy to delete.",
		Flags: lifecycleFlags([]string{"airflow-url", "dags-folder", "wait-parsed", "parse-timeout"}, []ucli.Flag{
			&ucli.BoolFlag{Name: "image-from-build", Usage: "make every Run step's image the one image build recorded"},
			&ucli.BoolFlag{Name: "take-over", Usage: "apply over an object (argo) or DAG file (airflow) of the flow's name that manifold did not deploy, making it the flow's"},
			&ucli.StringFlag{Name: "dry-run", Usage: "with --target argo: `server`, to have the API server check what deploy applies, and change nothing"},
		}, flowFlags()),
		Action: func(c *ucli.Context) error {
			return lifecycle(c, flow, true, engine.Deploy)
		},
	}
}

// undeployCommand is undeploy: what deploy made removed.
func undeployCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:        "undeploy",
		Usage:       "remove what deploy made for the flow, and nothing else; its runs stay",
		Description: "With --target argo, deletes the objects labelled with the flow and manifold.dev/deploy=argo.",
		Flags: lifecycleFlags([]string{"airflow-url", "dags-folder", "delete-dag"}, []ucli.Flag{
			&ucli.StringFlag{Name: "dry-run", Usage: "with --target argo: `server`, to have the API server check what undeploy deletes, and change nothing"},
		}, []ucli.Flag{configFlag()}),
		Action: func(c *ucli.Context) error {
			return lifecycle(c, flow, false, engine.Undeploy)
		},
	}
}

// triggerCommand is trigger: a run of the deployed flow.
func triggerCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "trigger",
		Usage: "run the deployed flow, with --param values, and print the run's name; --wait follows it",
		Description: "With --target argo, creates a Workflow from the flow's WorkflowTemplate. --wait follows it with\n" +
			"the live view of run --kube (steps, attempts, pods, nodes, the pods' logs), records it under\n" +
			".manifold/runs/<run>/, and exits with its result: 0 when it succeeded, 1 when a step failed\n" +
			"(named with its pod and the reason), 130 when interrupted. Ctrl-C asks, on a terminal, whether to\n" +
			"stop the run or leave it running; elsewhere --on-interrupt says (default: leave).",
		Flags: lifecycleFlags([]string{"airflow-url"}, append([]ucli.Flag{
			&ucli.BoolFlag{Name: "image-from-build", Usage: "make every Run step's image the one image build recorded"},
		}, waitFlags()...), flowFlags()),
		Action: func(c *ucli.Context) error {
			return lifecycle(c, flow, true, func(e engine, p *plan.Flow) error {
				params, err := triggerParams(c, p)
				if err != nil {
					return err
				}
				return e.Trigger(p, params)
			})
		},
	}
}

// runCommands are the lifecycle commands that act on a run.
func runCommands(flow *sdk.Flow) []*ucli.Command {
	return []*ucli.Command{
		runCommandOf(flow, "stop", "stop a run: its running steps are stopped and no other starts",
			"With --target argo, sets the Workflow's spec.shutdown to Stop, as `argo stop` does.",
			[]string{"airflow-url"}, engine.Stop),
		runCommandOf(flow, "suspend", "suspend a run on Argo: running steps finish, and no step starts until unsuspend",
			"Sets the Workflow's spec.suspend.",
			nil, engine.Suspend),
		runCommandOf(flow, "unsuspend", "let a run on Argo that suspend suspended go on (argo resume)",
			"Clears the Workflow's spec.suspend, as `argo resume` does. (resume, without --target, resumes a\n"+
				"failed run recorded here, as Metaflow's resume does; retry runs a failed run's steps again on the cluster.)",
			nil, engine.Unsuspend),
		runCommandOf(flow, "retry", "run again the failed steps of a run, on the cluster, in place; --wait follows it",
			"With --target argo, retries the Workflow as `argo retry` does: its failed nodes are reset and their\n"+
				"pods deleted, and Argo's controller runs them again; what succeeded is not run again.\n"+
				"Of a flow split into parts, a failed part's Workflow is created anew and runs all the part's steps.",
			[]string{"airflow-url"}, engine.Retry, waitFlags()...),
	}
}

// waitFlags are the flags of commands that follow a run.
func waitFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "wait", Usage: "follow the run until it ends, with the live view, and exit with its result"},
		&ucli.StringFlag{Name: "on-interrupt", DefaultText: "ask on a terminal, else leave", Usage: "with --wait: on Ctrl-C, `stop` the run or `leave` it running"},
	}
}

// targetFlag is --target of the lifecycle commands.
func targetFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "target", Usage: "the `TARGET` the flow is deployed to: argo or airflow (required)"}
}

// argoFlags are the flags that say which cluster runs Argo.
func argoFlags() []ucli.Flag {
	return append(clusterFlags("with --target argo: "), limitFlags("with --target argo: ")...)
}

// argoOnly names the flags that mean nothing with --target airflow.
var argoOnly = []string{"kubeconfig", "context", "namespace", "qps", "burst", "dry-run"}

// lifecycleFlags are the flags of a lifecycle command: --target, extra,
// Argo's, the flags of airflowFlags named by airflow, then common.
func lifecycleFlags(airflow []string, extra, common []ucli.Flag) []ucli.Flag {
	flags := []ucli.Flag{targetFlag()}
	flags = append(flags, extra...)
	flags = append(flags, argoFlags()...)
	flags = append(flags, flagsNamed(airflowFlags(), airflow...)...)
	return append(flags, common...)
}

// flagsNamed returns the flags of flags with the names given, in their order.
func flagsNamed(flags []ucli.Flag, names ...string) []ucli.Flag {
	var out []ucli.Flag
	for _, name := range names {
		f := findFlag(flags, name)
		if f == nil {
			panic("cli: no flag --" + name)
		}
		out = append(out, f)
	}
	return out
}

// runCommandOf is a lifecycle command that does act to the run RUN; airflow
// names the flags of airflowFlags it takes.
func runCommandOf(flow *sdk.Flow, name, usage, description string, airflow []string, act func(e engine, p *plan.Flow, run string) error, extra ...ucli.Flag) *ucli.Command {
	return &ucli.Command{
		Name: name, Usage: usage, Description: description, ArgsUsage: "RUN",
		Flags: lifecycleFlags(airflow, extra, []ucli.Flag{configFlag()}),
		Action: func(c *ucli.Context) error {
			if err := args(c, name, "RUN", 1, 1); err != nil {
				return err
			}
			return lifecycle(c, flow, false, onRun(c.Args().First(), act))
		},
	}
}

// onRun is act on run, with runid.Latest read first (see runOf).
func onRun(run string, act func(e engine, p *plan.Flow, run string) error) func(engine, *plan.Flow) error {
	return func(e engine, p *plan.Flow) error {
		run, err := runOf(e, p, run)
		if err != nil {
			return err
		}
		return act(e, p, run)
	}
}

// lifecycleTarget returns --target, refusing what names neither target.
func lifecycleTarget(c *ucli.Context) (string, error) {
	switch t := c.String("target"); t {
	case targetArgo, targetAirflow:
		return t, nil
	case "":
		return "", usageErr("%s: give --target argo or --target airflow", c.Command.Name)
	default:
		return "", usageErr("--target %q: %s takes argo or airflow", t, c.Command.Name)
	}
}

// triggerParams returns trigger's --param values, the run's arguments, each
// the name of one of p's params.
func triggerParams(c *ucli.Context, p *plan.Flow) (map[string]string, error) {
	params, err := paramFlags(c)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, prm := range p.Params {
		names = append(names, prm.Name)
	}
	slices.Sort(names)
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if slices.Contains(names, name) {
			continue
		}
		if len(names) == 0 {
			return nil, usageErr("--param %s: flow %s has no params", name, p.Name)
		}
		return nil, usageErr("--param %s: flow %s has no such param; its params are %s", name, p.Name, strings.Join(names, ", "))
	}
	return params, nil
}

// lifecycle compiles the flow (with --image-from-build when build) and does
// act on the engine --target names, after refusing the flags of the other
// target.
func lifecycle(c *ucli.Context, flow *sdk.Flow, build bool, act func(engine, *plan.Flow) error) error {
	if c.Command.Name == "deploy" || c.Command.Name == "undeploy" || c.Command.Name == "trigger" {
		if err := noArgs(c); err != nil {
			return err
		}
	}
	target, err := lifecycleTarget(c)
	if err != nil {
		return err
	}
	if err := checkLifecycleFlags(c, target); err != nil {
		return err
	}
	load := load
	if build {
		load = loadWithBuild
	}
	p, err := load(c, flow)
	if err != nil {
		return err
	}
	if c.Command.Name == "deploy" {
		// What deploy puts on the engine runs as pods on a cluster: the flow's
		// warnings, as compile prints them.
		if err := lint(c, p, false); err != nil {
			return err
		}
	}
	return act(engineOf(c, flow, target), p)
}

// checkLifecycleFlags refuses the flags of the target not chosen, and values
// the chosen one cannot take.
func checkLifecycleFlags(c *ucli.Context, target string) error {
	if target == targetAirflow {
		for _, name := range argoOnly {
			if c.IsSet(name) {
				return usageErr("--%s applies to --target argo, not airflow", name)
			}
		}
	} else {
		for _, f := range airflowFlags() {
			if name := f.Names()[0]; c.IsSet(name) {
				return usageErr("--%s applies to --target airflow, not argo", name)
			}
		}
		if err := checkLimits(c); err != nil {
			return err
		}
	}
	if c.IsSet("on-interrupt") {
		if v := c.String("on-interrupt"); v != interruptStop && v != interruptLeave {
			return usageErr("--on-interrupt %q: choose stop or leave", v)
		}
		if !c.Bool("wait") {
			return usageErr("--on-interrupt applies to a run followed with --wait")
		}
	}
	return nil
}

// argoEngine is the engine of --target argo: Argo Workflows on the cluster
// the flags name, connected to anew by each operation.
type argoEngine struct{ c *ucli.Context }

func (e argoEngine) Deploy(p *plan.Flow) error {
	if err := dryRunFlag(e.c); err != nil {
		return err
	}
	return argoDeploy(e.c, p, false)
}

func (e argoEngine) Undeploy(p *plan.Flow) error {
	if err := dryRunFlag(e.c); err != nil {
		return err
	}
	return argoDeploy(e.c, p, true)
}

func (e argoEngine) Trigger(p *plan.Flow, params map[string]string) error {
	return argoTrigger(e.c, p, params)
}

func (e argoEngine) Stop(p *plan.Flow, run string) error {
	return argoAct(e.c, p, run, "stopping", (*argo.Client).Stop)
}

func (e argoEngine) Suspend(p *plan.Flow, run string) error {
	return argoAct(e.c, p, run, "suspended", (*argo.Client).Suspend)
}

func (e argoEngine) Unsuspend(p *plan.Flow, run string) error {
	return argoAct(e.c, p, run, "unsuspended", (*argo.Client).Resume)
}

func (e argoEngine) Retry(p *plan.Flow, run string) error { return argoRetry(e.c, p, run) }
func (e argoEngine) List(p *plan.Flow) error              { return argoRunsList(e.c, p) }
func (e argoEngine) Show(p *plan.Flow, run string) error  { return argoRunsShow(e.c, p, run) }
func (e argoEngine) Latest(p *plan.Flow) (string, error)  { return argoLatest(e.c, p) }
func (e argoEngine) Logs(p *plan.Flow, run, step string) error {
	if e.c.IsSet("index") || e.c.IsSet("attempt") {
		return usageErr("logs --index and --attempt with --target argo: leave them out for every pod's log, or read the run's record (without --target) when it was followed with --wait")
	}
	return argoLogs(e.c, p, run, step)
}

// argoLatest is the flow's Workflow on the cluster that started last.
func argoLatest(c *ucli.Context, p *plan.Flow) (string, error) {
	a, err := argoClient(c, p)
	if err != nil {
		return "", err
	}
	runs, err := a.List(c.Context)
	if err != nil {
		return "", invalidErr(err)
	}
	if len(runs) == 0 {
		return "", invalidErr(fmt.Errorf("no run of flow %s on Argo in namespace %s of %s: trigger one first", p.Name, a.Namespace(), a.Where()))
	}
	return runs[len(runs)-1].Name, nil
}

// dryRunFlag refuses a --dry-run other than server.
func dryRunFlag(c *ucli.Context) error {
	if v := c.String("dry-run"); c.IsSet("dry-run") && v != "server" {
		return usageErr("--dry-run %q: only --dry-run=server is supported (the API server checks everything, and nothing changes)", v)
	}
	return nil
}

// argoClient connects to the cluster the flags name, for flow p.
func argoClient(c *ucli.Context, p *plan.Flow) (*argo.Client, error) {
	width, height, live := terminal(c.App.Writer)
	o := argo.Options{
		Kubeconfig: c.String("kubeconfig"), Context: c.String("context"), Namespace: c.String("namespace"),
		QPS: float32(c.Float64("qps")), Burst: c.Int("burst"),
		Program: c.App.Name, Stdout: c.App.Writer, Stderr: c.App.ErrWriter,
		Live: live, Width: width, Height: height, Force: forceContext(c.Context),
		OnInterrupt: onInterrupt(c), TakeOver: c.Bool("take-over"),
	}
	a, err := argo.Connect(c.Context, p, o)
	if err != nil {
		return nil, invalidErr(err)
	}
	return a, nil
}

// onInterrupt returns what decides, when Ctrl-C interrupts a followed run,
// whether to stop it: --on-interrupt, else the answer to a question on a
// terminal, else leave it running.
func onInterrupt(c *ucli.Context) func(string) bool {
	if c.IsSet("on-interrupt") {
		stop := c.String("on-interrupt") == interruptStop
		return func(string) bool { return stop }
	}
	return func(run string) bool {
		if !term.IsTerminal(int(os.Stdin.Fd())) {
			return false
		}
		fmt.Fprintf(c.App.ErrWriter, "\nstop run %s on the cluster, or leave it running? [s]top / [L]eave: ", run)
		answer := make(chan string, 1)
		go func() {
			line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
			answer <- line
		}()
		select {
		case line := <-answer:
			switch strings.ToLower(strings.TrimSpace(line)) {
			case "s", "stop":
				return true
			}
		case <-forceContext(c.Context).Done():
			// Ctrl-C again: leave it.
			fmt.Fprintln(c.App.ErrWriter)
		}
		return false
	}
}

// argoDeploy applies (or, with undeploy, deletes) the flow's objects.
func argoDeploy(c *ucli.Context, p *plan.Flow, undeploy bool) error {
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	dry := c.String("dry-run") == "server"
	var done []argo.Applied
	if undeploy {
		done, err = a.Undeploy(c.Context, dry)
	} else {
		done, err = a.Deploy(c.Context, dry)
	}
	suffix := ""
	if dry {
		suffix = " (server dry run)"
	}
	for _, d := range done {
		fmt.Fprintf(c.App.Writer, "%s%s\n", d, suffix)
	}
	if err != nil {
		return invalidErr(err)
	}
	switch {
	case dry:
		fmt.Fprintln(c.App.Writer, "nothing was changed: the API server checked it")
	case undeploy && len(done) == 0:
		fmt.Fprintf(c.App.Writer, "flow %s has nothing deployed in namespace %s of %s\n", p.Name, a.Namespace(), a.Where())
	case undeploy:
		fmt.Fprintf(c.App.Writer, "undeployed flow %s from namespace %s of %s; its Workflows stay (`%s runs list --target argo`)\n", p.Name, a.Namespace(), a.Where(), c.App.Name)
	default:
		fmt.Fprintf(c.App.Writer, "deployed flow %s to namespace %s of %s: `%s trigger --target argo --wait` runs it\n", p.Name, a.Namespace(), a.Where(), c.App.Name)
	}
	return nil
}

// argoTrigger creates a run and, with --wait, follows it.
func argoTrigger(c *ucli.Context, p *plan.Flow, params map[string]string) error {
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	if c.Bool("wait") {
		// A followed run is traced from its creation, so that its steps'
		// pods get its trace context as TRACEPARENT.
		tracer, endTracing, err := startTracing(c)
		if err != nil {
			return err
		}
		defer endTracing()
		a.SetTracer(tracer)
	}
	name, note, err := a.Trigger(c.Context, params)
	if err != nil {
		return invalidErr(err)
	}
	if note != "" {
		fmt.Fprintf(c.App.ErrWriter, "note: %s\n", note)
	}
	fmt.Fprintln(c.App.Writer, name)
	if !c.Bool("wait") {
		return nil
	}
	res, err := a.Follow(c.Context, name)
	return followErr(res, err)
}

// argoFollow follows run name until it ends, traced as run --kube is, and
// exits with its result.
func argoFollow(c *ucli.Context, a *argo.Client, name string) error {
	tracer, endTracing, err := startTracing(c)
	if err != nil {
		return err
	}
	defer endTracing()
	a.SetTracer(tracer)
	res, err := a.Follow(c.Context, name)
	return followErr(res, err)
}

// followErr is the exit of a followed run.
func followErr(res *dag.Result, err error) error {
	switch {
	case err == nil:
		return nil
	case res != nil && res.State == record.Interrupted, errors.Is(err, dag.ErrInterrupted):
		return &exitError{code: ExitInterrupted, err: err}
	}
	return invalidErr(err)
}

// argoAct does act to run, and says so.
func argoAct(c *ucli.Context, p *plan.Flow, run, done string, act func(*argo.Client, context.Context, string) error) error {
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	if err := act(a, c.Context, run); err != nil {
		return invalidErr(err)
	}
	fmt.Fprintf(c.App.Writer, "%s run %s\n", done, run)
	return nil
}

// argoRetry retries run and, with --wait, follows it.
func argoRetry(c *ucli.Context, p *plan.Flow, run string) error {
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	steps, err := a.Retry(c.Context, run)
	if err != nil {
		return invalidErr(err)
	}
	fmt.Fprintf(c.App.Writer, "retrying run %s: %s run again\n", run, strings.Join(steps, ", "))
	if !c.Bool("wait") {
		return nil
	}
	return argoFollow(c, a, run)
}

// argoRunsList lists the flow's runs on the cluster.
func argoRunsList(c *ucli.Context, p *plan.Flow) error {
	if err := argoTable(c); err != nil {
		return err
	}
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	runs, err := a.List(c.Context)
	if err != nil {
		return invalidErr(err)
	}
	rows := [][]string{{"RUN", "STATE", "STARTED", "DURATION", "PROGRESS", "MESSAGE"}}
	for _, r := range runs {
		end := r.Finished
		if end.IsZero() {
			end = time.Now()
		}
		rows = append(rows, []string{r.Name, r.Phase, r.Started.Local().Format(time.DateTime), end.Sub(r.Started).Round(time.Second).String(), r.Progress, r.Message})
	}
	return writeTable(c.App.Writer, rows)
}

// argoTable refuses --output other than table with --target argo, whose runs
// are Workflows, not records.
func argoTable(c *ucli.Context) error {
	if f := c.String("output"); f != output.Table {
		return usageErr("runs %s --target argo prints a table: leave out --output %s (a run followed with --wait is recorded here, and runs %s -o %s reads it without --target)", c.Command.Name, f, c.Command.Name, f)
	}
	return nil
}

// argoRunsShow shows one run on the cluster.
func argoRunsShow(c *ucli.Context, p *plan.Flow, run string) error {
	if err := argoTable(c); err != nil {
		return err
	}
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	st, err := a.Show(c.Context, run)
	if err != nil {
		return invalidErr(err)
	}
	phase := st.Phase
	if st.Suspended {
		phase += ", suspended"
	}
	fmt.Fprintf(c.App.Writer, "run %s of flow %s: %s\n", st.Name, p.Name, phase)
	fmt.Fprintf(c.App.Writer, "on Argo Workflows in namespace %s of %s\n", a.Namespace(), a.Where())
	if st.Message != "" {
		fmt.Fprintf(c.App.Writer, "message: %s\n", st.Message)
	}
	if len(st.Parts) > 0 {
		fmt.Fprintf(c.App.Writer, "parts: %s\n", strings.Join(st.Parts, ", "))
	}
	rows := [][]string{{"STEP", "STATE", "ATTEMPTS", "DURATION", "POD", "NODE", "MESSAGE"}}
	for _, s := range st.Steps {
		d := ""
		if !s.Started.IsZero() {
			end := s.Finished
			if end.IsZero() {
				end = time.Now()
			}
			d = end.Sub(s.Started).Round(time.Second).String()
		}
		rows = append(rows, []string{s.Label, s.Phase, fmt.Sprint(s.Attempts), d, s.Pod, s.Node, firstLineOf(s.Message)})
	}
	return writeTable(c.App.Writer, rows)
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// argoLogs prints what a run's pods wrote.
func argoLogs(c *ucli.Context, p *plan.Flow, run, step string) error {
	a, err := argoClient(c, p)
	if err != nil {
		return err
	}
	if err := a.Logs(c.Context, run, step, c.App.Writer); err != nil {
		return invalidErr(err)
	}
	return nil
}

// targetRunsList is runs list --target: the flow's runs on the target.
func targetRunsList(c *ucli.Context, flow *sdk.Flow) error {
	return targetRuns(c, flow, engine.List)
}

// targetRunsShow is runs show --target: one run on the target.
func targetRunsShow(c *ucli.Context, flow *sdk.Flow, run string) error {
	return targetRuns(c, flow, onRun(run, engine.Show))
}

// targetLogs is logs --target: a run's logs on the target, of step or of
// every step when step is "".
func targetLogs(c *ucli.Context, flow *sdk.Flow, run, step string) error {
	return targetRuns(c, flow, onRun(run, func(e engine, p *plan.Flow, run string) error {
		return e.Logs(p, run, step)
	}))
}

// targetRuns runs the --target side of runs list, runs show and logs: the
// flow is compiled with --config alone.
func targetRuns(c *ucli.Context, flow *sdk.Flow, act func(engine, *plan.Flow) error) error {
	target, err := lifecycleTarget(c)
	if err != nil {
		return err
	}
	if err := checkLifecycleFlags(c, target); err != nil {
		return err
	}
	var o compile.Options
	path, explicit := c.String("config"), c.IsSet("config")
	if !explicit {
		path = compile.ConfigFile
	}
	switch cfg, err := compile.LoadConfig(path); {
	case err == nil:
		o.Config = cfg
	case !explicit && errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, fs.ErrNotExist):
		return usageErr("--config %s: no such file", path)
	default:
		return invalidErr(err)
	}
	p, errs := compile.Compile(flow, o)
	if len(errs) > 0 {
		printErrors(c.App.ErrWriter, flowName(flow), errs)
		return silentInvalid
	}
	return act(engineOf(c, flow, target), p)
}

// targetRunsFlags are the flags runs list, runs show and logs take to read a
// flow's runs on a target instead of the local records.
func targetRunsFlags() []ucli.Flag {
	flags := []ucli.Flag{&ucli.StringFlag{Name: "target", Usage: "read the flow's runs on `TARGET`, argo or airflow, instead of the local records"}}
	flags = append(flags, argoFlags()...)
	flags = append(flags, flagsNamed(airflowFlags(), "airflow-url")...)
	return append(flags, configFlag())
}
