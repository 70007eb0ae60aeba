package cli

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// Environment of the step command.
const (
	// EnvRunDir is the run directory that holds artifacts.
	EnvRunDir = "MANIFOLD_RUN_DIR"
	// DefaultRunDir is the run directory when EnvRunDir is unset.
	DefaultRunDir = ".manifold/runs/default"
)

func stepCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:      "step",
		Usage:     "run one Run step's Go code (what the step's container runs)",
		ArgsUsage: "NAME",
		Description: "Runs the body of the Run step NAME in this process. Params come from MANIFOLD_PARAM_<NAME>\n" +
			"(else --param, else their defaults), a foreach item from MANIFOLD_ITEM and MANIFOLD_INDEX, and\n" +
			"artifacts live under MANIFOLD_RUN_DIR (default " + DefaultRunDir + ").",
		Flags: flowFlags(),
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageErr("step takes one step name, got %d arguments (flags go before the name)", c.NArg())
			}
			name := c.Args().First()
			p, err := load(c, flow)
			if err != nil {
				return err
			}
			s := p.Step(name)
			if s == nil {
				return usageErr("flow %s has no step %q", p.Name, name)
			}
			if s.Body != plan.BodyRun {
				return usageErr("step %q runs a command in its image, not Go code: there is nothing to run here", name)
			}
			cfg, err := stepContext(p, s)
			if err != nil {
				return invalidErr(err)
			}
			if err := runBody(flow, sdk.NewContext(c.Context, cfg)); err != nil {
				return invalidErr(fmt.Errorf("step %s: %w", name, err))
			}
			return nil
		},
	}
}

// stepContext reads the step's params, item and run directory from the environment
// that every target gives its container.
func stepContext(p *plan.Flow, s *plan.Step) (sdk.ContextConfig, error) {
	cfg := sdk.ContextConfig{Flow: p.Name, Step: s.Name, Params: map[string]string{}, Index: -1, RunDir: DefaultRunDir}
	for _, param := range p.Params {
		cfg.Params[param.Name] = param.Value
		if v, ok := os.LookupEnv(param.Env); ok {
			cfg.Params[param.Name] = v
		}
	}
	if dir := os.Getenv(EnvRunDir); dir != "" {
		cfg.RunDir = dir
	}
	if s.Foreach != nil {
		item, hasItem := os.LookupEnv(plan.EnvItem)
		index, hasIndex := os.LookupEnv(plan.EnvIndex)
		if !hasItem || !hasIndex {
			return cfg, fmt.Errorf("step %s runs once per foreach item and needs %s and %s in its environment", s.Name, plan.EnvItem, plan.EnvIndex)
		}
		i, err := strconv.Atoi(index)
		if err != nil || i < 0 || i >= len(s.Foreach) {
			return cfg, fmt.Errorf("%s=%q: want an index from 0 to %d", plan.EnvIndex, index, len(s.Foreach)-1)
		}
		cfg.Item, cfg.Index = item, i
	}
	return cfg, nil
}

// runBody calls the step's Run function; a panic becomes an error with its stack.
func runBody(flow *sdk.Flow, ctx *sdk.Context) (err error) {
	var fn func(*sdk.Context) error
	for _, d := range flow.Spec().Steps {
		if d.Name == ctx.Step() {
			fn = d.Spec.Run
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(ctx)
}
