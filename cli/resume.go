package cli

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// resumeCommand resumes a failed or interrupted run, as Metaflow's resume
// does: it is run --run-id RUN with the params the run was made with, on the
// machine or cluster it ran on. run is the run command, whose flags it takes,
// but for those the record decides.
func resumeCommand(flow *sdk.Flow, run *ucli.Command) *ucli.Command {
	fromRecord := []string{"run-id", "param", "kube", "context", "namespace", "as"}
	var flags []ucli.Flag
	for _, f := range run.Flags {
		if !slices.Contains(fromRecord, f.Names()[0]) {
			flags = append(flags, f)
		}
	}
	// --target is not resume's: a run on Argo or Airflow is retried, or
	// unsuspended, by the lifecycle commands; the flag says so.
	flags = append(flags, &ucli.StringFlag{Name: "target", Hidden: true})
	return &ucli.Command{
		Name:      "resume",
		Usage:     "resume a failed or interrupted run: what succeeded is not run again",
		ArgsUsage: "RUN",
		Description: "Runs the run RUN again where it stopped, as run --run-id RUN does, with the params it was\n" +
			"made with and, for a run --kube, on its cluster: its kubeconfig context, namespace and kind of\n" +
			"object. Steps and items that succeeded are not run again, unless the step changed since (its\n" +
			"compiled spec, or for a Run step this program's build): fix a failed step's code or its --set,\n" +
			"then resume. run's other flags apply.\n\n" +
			"A run on Argo Workflows or Airflow is retried there (retry --target argo|airflow RUN), and a\n" +
			"suspended Argo run is resumed with unsuspend --target argo RUN.",
		Flags: flags,
		Action: func(c *ucli.Context) error {
			if c.IsSet("target") {
				return usageErr("resume resumes a failed run recorded here; on --target %s, `%s retry --target %s RUN` runs a run's failed steps again, and `%s unsuspend --target argo RUN` resumes a suspended Argo run", c.String("target"), c.App.Name, c.String("target"), c.App.Name)
			}
			if err := args(c, "resume", "RUN", 1, 1); err != nil {
				return err
			}
			rec, _, err := record.Read(record.DefaultRoot, c.Args().First())
			if err != nil {
				return invalidErr(fmt.Errorf("%w (`%s runs list` lists the runs)", err, c.App.Name))
			}
			if rec.Flow != flowName(flow) {
				return invalidErr(fmt.Errorf("run %s belongs to flow %s, not %s: resume it with that flow's program", rec.ID, rec.Flow, flowName(flow)))
			}
			line, err := resumeLine(c.App.Name, rec)
			if err != nil {
				return err
			}
			line = append(line, setFlags(c)...)
			return c.App.RunContext(c.Context, line)
		},
	}
}

// resumeLine is the command line of program that resumes run rec: run
// --run-id, with the params of the record and, for a run --kube, its
// cluster's flags.
func resumeLine(program string, rec *record.Record) ([]string, error) {
	line := []string{program, "run", "--run-id", rec.ID}
	switch rec.Runtime {
	case record.Local:
	case record.Kube:
		line = append(line, "--kube")
		for _, f := range [][2]string{{"context", rec.Context}, {"namespace", rec.Namespace}, {"as", rec.As}} {
			if f[1] != "" {
				line = append(line, "--"+f[0], f[1])
			}
		}
	default:
		return nil, usageErr("run %s ran on %s, which keeps it: `%s retry --target %s %s` runs its failed steps again", rec.ID, rec.Runtime, program, rec.Runtime, rec.ID)
	}
	for _, name := range slices.Sorted(maps.Keys(rec.Params)) {
		line = append(line, "--param", name+"="+rec.Params[name])
	}
	return line, nil
}

// setFlags returns the flags set on c's command line, written out again, one
// "--name=value" each (a repeated flag once per value).
func setFlags(c *ucli.Context) []string {
	var out []string
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		switch f.(type) {
		case *ucli.StringSliceFlag:
			for _, v := range c.StringSlice(name) {
				out = append(out, "--"+name+"="+v)
			}
		case *ucli.BoolFlag:
			out = append(out, "--"+name+"="+strconv.FormatBool(c.Bool(name)))
		default:
			out = append(out, fmt.Sprintf("--%s=%v", name, c.Value(name)))
		}
	}
	return out
}
