package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// Environment of the step command.
const (
	// EnvRunDir is the run directory that holds artifacts.
	EnvRunDir = plan.EnvRunDir
	// DefaultRunDir is the run directory when EnvRunDir is unset.
	DefaultRunDir = record.DefaultRoot + "/default"
)

func stepCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:      "step",
		Usage:     "run one Run step's Go code (what the step's container runs)",
		ArgsUsage: "NAME",
		Description: "Runs the body of the Run step NAME in this process. Params come from MANIFOLD_PARAM_<NAME>\n" +
			"(else --param, else their defaults), a foreach item from MANIFOLD_ITEM and MANIFOLD_INDEX. Artifacts\n" +
			"live in the flow's artifact store, under <MANIFOLD_ARTIFACT_STORE>/<flow>/<MANIFOLD_RUN_ID>/ (an\n" +
			"s3:// URL, with MANIFOLD_S3_ENDPOINT for an S3-compatible server, or a directory), which every\n" +
			"pod of a flow with a store gets; else under MANIFOLD_RUN_DIR (default " + DefaultRunDir + ").\n\n" +
			"The flow is not compiled again here: the container was made from a compiled flow, and\n" +
			"manifold.toml and --set, which shaped its pod, are not in the container.",
		Flags: []ucli.Flag{
			paramFlag(),
		},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageErr("step takes one step name, got %d arguments (see %s --help)", c.NArg(), commandPath(c))
			}
			spec := flow.Spec()
			step, err := findRunStep(spec, c.Args().First())
			if err != nil {
				return err
			}
			params, err := paramFlags(c)
			if err != nil {
				return err
			}
			cfg, err := stepContext(spec, step, params)
			if err != nil {
				return err
			}
			if cfg.Store, err = stepStore(c.Context, spec.Name); err != nil {
				return invalidErr(fmt.Errorf("step %s: %w", step.Name, err))
			}
			if err := dynamicItem(c.Context, step, &cfg); err != nil {
				return invalidErr(err)
			}
			if err := sdk.Invoke(step.Spec.Run, sdk.NewContext(c.Context, cfg)); err != nil {
				return invalidErr(fmt.Errorf("step %s: %w", step.Name, err))
			}
			if err := writeValuesFile(cfg.Values, os.Getenv(plan.EnvValuesFile)); err != nil {
				return invalidErr(fmt.Errorf("step %s: writing its values for its engine: %w", step.Name, err))
			}
			return nil
		},
	}
}

func findRunStep(spec sdk.FlowSpec, name string) (*sdk.StepDecl, error) {
	var runSteps []string
	for i := range spec.Steps {
		d := &spec.Steps[i]
		if d.Spec.Run != nil {
			runSteps = append(runSteps, d.Name)
		}
		if d.Name != name {
			continue
		}
		if d.Spec.Run == nil {
			return nil, usageErr("step %q runs a command in its image, not Go code: there is nothing to run here", name)
		}
		return d, nil
	}
	return nil, usageErr("flow %s has no step %q; its Run steps are %s%s", spec.Name, name, strings.Join(runSteps, ", "), suggest.DidYouMean(name, runSteps))
}

// stepContext gives the step its params, foreach item and run directory from the
// environment that every target gives its container.
func stepContext(spec sdk.FlowSpec, step *sdk.StepDecl, given map[string]string) (sdk.ContextConfig, error) {
	cfg := sdk.ContextConfig{Flow: spec.Name, Step: step.Name, Params: map[string]string{}, Index: -1, RunDir: DefaultRunDir}
	declared := map[string]bool{}
	for _, p := range spec.Params {
		declared[p.Name] = true
		cfg.Params[p.Name] = p.Default
		if v, ok := given[p.Name]; ok {
			cfg.Params[p.Name] = v
		}
		if v, ok := os.LookupEnv(plan.ParamEnv(p.Name)); ok {
			cfg.Params[p.Name] = v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		if !declared[name] {
			return cfg, usageErr("--param %s: flow %s declares no such param", name, spec.Name)
		}
	}
	for _, p := range spec.Params {
		if errs := compile.CheckParamValue(p.Name, cfg.Params[p.Name]); len(errs) > 0 {
			return cfg, invalidErr(fmt.Errorf("step %s: %w", step.Name, errs.ToAggregate()))
		}
	}
	if dir := os.Getenv(EnvRunDir); dir != "" {
		cfg.RunDir = dir
	}
	cfg.TraceParent = os.Getenv(plan.EnvTraceParent)
	cfg.Values = os.Getenv(plan.EnvValues)
	cfg.Spec = &spec
	if step.Spec.ForeachOf != nil {
		return cfg, nil // its item is read from the store (dynamicItem)
	}
	items := step.Spec.Foreach
	if items == nil {
		return cfg, nil
	}
	item, from, hasItem, err := envItem()
	if err != nil {
		return cfg, invalidErr(fmt.Errorf("step %s: %w", step.Name, err))
	}
	index, hasIndex := os.LookupEnv(plan.EnvIndex)
	if !hasItem || !hasIndex {
		return cfg, invalidErr(fmt.Errorf("step %s runs once per foreach item and needs %s (or %s) and %s in its environment", step.Name, plan.EnvItem, plan.EnvItemFile, plan.EnvIndex))
	}
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || i >= len(items) {
		return cfg, invalidErr(fmt.Errorf("%s=%q: want an index from 0 to %d", plan.EnvIndex, index, len(items)-1))
	}
	if item != items[i] {
		return cfg, invalidErr(fmt.Errorf(from+", but item %d of step %s is %q", item, i, step.Name, items[i]))
	}
	cfg.Item, cfg.Index = item, i
	return cfg, nil
}

// envItem returns the foreach item the environment gives: the file
// MANIFOLD_ITEM_FILE names (a fan-out run as one Indexed Job), else
// MANIFOLD_ITEM; how to tell of it (a format of the item); and whether it
// gives one.
func envItem() (item, from string, ok bool, err error) {
	if file := os.Getenv(plan.EnvItemFile); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return "", "", false, fmt.Errorf("reading its foreach item (%s): %w", plan.EnvItemFile, err)
		}
		return string(data), plan.EnvItemFile + " holds %q", true, nil
	}
	item, ok = os.LookupEnv(plan.EnvItem)
	return item, plan.EnvItem + "=%q", ok, nil
}

// dynamicItem gives a step of sdk.ForeachOf its item: the element at its
// index (MANIFOLD_INDEX) of the list the step fans out over, read from the
// run's store as its runtime read it to make the items.
func dynamicItem(ctx context.Context, step *sdk.StepDecl, cfg *sdk.ContextConfig) error {
	ref := step.Spec.ForeachOf
	if ref == nil {
		return nil
	}
	index, ok := os.LookupEnv(plan.EnvIndex)
	if !ok {
		return fmt.Errorf("step %s runs once per item of %s's %s and needs %s in its environment", step.Name, ref.Step, ref.Name, plan.EnvIndex)
	}
	list, err := sdk.NewContext(ctx, *cfg).List(*ref)
	if err != nil {
		return fmt.Errorf("step %s: %w", step.Name, err)
	}
	i, err := strconv.Atoi(index)
	if err != nil || i < 0 || i >= len(list) {
		return fmt.Errorf("%s=%q: want an index from 0 to %d (%s's %s has %d items)", plan.EnvIndex, index, len(list)-1, ref.Step, ref.Name, len(list))
	}
	cfg.Index, cfg.ItemJSON, cfg.Item, cfg.Count = i, list[i], sdk.ItemText(list[i]), len(list)
	return nil
}
