package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/sdk"
)

// The targets a flow is deployed to and run on by the lifecycle commands.
const (
	targetArgo    = "argo"
	targetAirflow = "airflow"
)

// Values of --on-interrupt.
const (
	interruptStop  = "stop"
	interruptLeave = "leave"
)

// flowFlags are the flags of every command that compiles the flow.
func flowFlags() []ucli.Flag {
	return []ucli.Flag{
		paramFlag(),
		&ucli.StringSliceFlag{Name: "set", Usage: "override a step option, `STEP.OPTION=VALUE`, such as train.efa=4, or train.trainium=0 for none (repeatable); options: " + strings.Join(compile.SetOptions(), ", ")},
		configFlag(),
		&ucli.StringFlag{Name: "artifacts", Usage: "keep artifacts on a cluster in `STORE`: s3://bucket/prefix, or pvc://CLAIM for a ReadWriteMany volume (replaces sdk.ArtifactVolume and manifold.toml's artifacts)"},
		&ucli.StringFlag{Name: "artifacts-endpoint", Usage: "the `URL` of the S3-compatible server of an s3:// artifact store, such as http://minio.storage:9000"},
	}
}

// configFlag is --config, the manifold.toml to read.
func configFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "config", Usage: "read defaults from `FILE` (default: " + compile.ConfigFile + " in the working directory, if present)"}
}

// load compiles the flow with the command's flags. Errors in the flow are printed
// to stderr one per line, with their paths.
func load(c *ucli.Context, flow *sdk.Flow) (*plan.Flow, error) {
	opts, err := options(c, flow)
	if err != nil {
		return nil, err
	}
	p, errs := compile.Compile(flow, opts)
	if len(errs) > 0 {
		printErrors(c.App.ErrWriter, flowName(flow), errs)
		return nil, silentInvalid
	}
	return p, nil
}

func printErrors[E error](w io.Writer, flow string, errs []E) {
	fmt.Fprintf(w, "flow %s is invalid: %s\n", flow, display.Count(len(errs), "error"))
	for _, e := range errs {
		fmt.Fprintln(w, e.Error())
	}
}

func flowName(f *sdk.Flow) string {
	if f == nil {
		return "(nil)"
	}
	return f.Name()
}

// options turns --param, --set and --config into compile options.
func options(c *ucli.Context, flow *sdk.Flow) (compile.Options, error) {
	var o compile.Options
	params, err := paramFlags(c)
	if err != nil {
		return o, err
	}
	if c.Command.Name != "trigger" {
		// trigger's --param values are the run's arguments: the flow compiles
		// as it was deployed, with its own defaults.
		o.Params = params
	}
	o.Artifacts, o.ArtifactsEndpoint = c.String("artifacts"), c.String("artifacts-endpoint")
	for _, s := range c.StringSlice("set") {
		step, opt, err := parseSet(s)
		if err != nil {
			return o, err
		}
		if !hasStep(flow, step) {
			names := stepNames(flow, false)
			return o, usageErr("--set %q: flow %s has no step %q; its steps are %s%s", s, flowName(flow), step, strings.Join(names, ", "), suggest.DidYouMean(step, names))
		}
		if o.Overrides == nil {
			o.Overrides = map[string][]sdk.StepOption{}
		}
		o.Overrides[step] = append(o.Overrides[step], opt)
	}
	path, explicit := c.String("config"), c.IsSet("config")
	if !explicit {
		path = compile.ConfigFile
	}
	cfg, err := compile.LoadConfig(path)
	switch {
	case err == nil:
		o.Config = cfg
	case !explicit && errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, fs.ErrNotExist):
		return o, usageErr("--config %s: no such file", path)
	default:
		return o, invalidErr(err)
	}
	o.ReadBuiltImage = func() (built.Record, error) { return built.Read(built.File) }
	return o, nil
}

// paramFlag is --param (-p), NAME=VALUE, repeatable.
func paramFlag() ucli.Flag {
	return &ucli.GenericFlag{Name: "param", Aliases: []string{"p"}, Value: &paramList{}, Usage: "set a flow param, `NAME=VALUE` (repeatable)"}
}

// paramList holds --param's values as given, byte for byte. (urfave/cli's
// string slices pass a flag's values on to its aliases through JSON, which
// makes every byte that is not UTF-8 U+FFFD, and the value another.)
type paramList struct{ values []string }

// aliasCopy is what urfave/cli hands an alias of --param (Serialize): the
// alias shares the paramList, which holds every value already. A command line
// cannot hold its NUL byte.
const aliasCopy = "\x00"

func (l *paramList) Set(v string) error {
	if v != aliasCopy {
		l.values = append(l.values, v)
	}
	return nil
}

func (l *paramList) String() string { return "" }

// Serialize is what urfave/cli sets --param's aliases to.
func (l *paramList) Serialize() string { return aliasCopy }

// paramFlags parses --param NAME=VALUE flags. A value that is not UTF-8 is
// refused at its param's path, before anything is compiled or asked.
func paramFlags(c *ucli.Context) (map[string]string, error) {
	var params map[string]string
	l, _ := c.Generic("param").(*paramList)
	if l == nil {
		return nil, nil
	}
	for _, kv := range l.values {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErr("--param %q: write NAME=VALUE", kv)
		}
		if errs := compile.CheckParamValue(k, v); len(errs) > 0 {
			return nil, invalidErr(errs.ToAggregate())
		}
		if params == nil {
			params = map[string]string{}
		}
		params[k] = v
	}
	return params, nil
}

func hasStep(flow *sdk.Flow, name string) bool {
	return slices.Contains(stepNames(flow, false), name)
}

// parseSet parses a --set flag, STEP.OPTION=VALUE (compile.ParseSet).
func parseSet(s string) (string, sdk.StepOption, error) {
	step, opt, err := compile.ParseSet(s)
	if err != nil {
		return "", nil, usageErr("--set %q: %v", s, err)
	}
	return step, opt, nil
}
