// Package flowtest runs a flow inside a Go test, as `go test` runs any code:
// in the test's process, in a temporary run directory, on a fake clock.
//
//	func TestHello(t *testing.T) {
//		run := flowtest.Run(t, flow, flowtest.Params("name=manifold"), flowtest.Exec("echo"))
//		run.WantSuccess(t)
//		run.WantRan(t, "greet", "shout", "echo")
//		if got := flowtest.Artifact[string](t, run, "shout", "shout"); got != "HELLO, MANIFOLD!" {
//			t.Errorf("shout = %q", got)
//		}
//	}
//
// Run compiles the flow as the flow program's run command does (its params,
// --set overrides and manifold.toml), then runs it with the scheduling core
// every runtime shares (package runtimes/dag): steps start once the steps they
// wait for have succeeded, a failed step stops the steps after it, a foreach
// step runs once per item, and Retry, RetryBackoff and Timeout apply as
// declared. The run is recorded as a local run is, in a directory of
// t.TempDir(): run.json, each step's (and item's) state.json, and its artifacts
// under <step>[/<index>]/ (Result.Dir).
//
// What each step runs:
//
//   - A Run step calls its Go function in the test's process, with the
//     sdk.Context the step's container would give it (its params, foreach item
//     and artifacts); it takes no time on the fake clock. Its output goes to the
//     test's standard output, and os.Getenv sees the test's environment: a body
//     reads its params with ctx.Param.
//   - A Command step is stubbed (Stub): each attempt calls the stub's actions
//     instead of starting a process, with the argv and environment the process
//     would have had. Or, with Exec, it runs as a process of this machine,
//     exactly as the run command runs it, in real time.
//
// A step may take time on the fake clock: a stub's Takes (or Call.Take) moves
// the clock for that attempt, so a step that takes longer than its
// sdk.Timeout(6*time.Hour) times out at once in real time, and a retry's
// backoff of minutes is waited out by the clock alone. Steps ready at the
// same time start together, in flow order, and run one after another: a run is
// the same every time.
//
// Run fails the test (t.Fatalf) only when the run cannot start: the flow does
// not compile, or an option names no step or a step it cannot apply to. How
// the run ended is in the Result, for the test to check: its Want methods
// report what differs with a table of every step, and Artifact decodes what a
// step put.
package flowtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// An Option changes how Run runs a flow. Options apply in order.
type Option interface {
	apply(*config)
}

// config is what the options set.
type config struct {
	params    map[string]string
	sets      []string
	items     map[string][]string
	stubs     map[string][]Action
	exec      map[string]bool
	cfgPath   string
	cfgGiven  bool
	problems  []string
	stubOrder []string
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Params sets flow params, each written NAME=VALUE as the run command's
// --param takes it; a param not given keeps its default.
func Params(nameValues ...string) Option {
	return optionFunc(func(c *config) {
		for _, kv := range nameValues {
			name, value, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				c.problems = append(c.problems, fmt.Sprintf("flowtest.Params(%q): write NAME=VALUE, such as epochs=1", kv))
				continue
			}
			c.params[name] = value
		}
	})
}

// Set overrides step options, each written STEP.OPTION=VALUE as the run
// command's --set takes it (train.retry=0, train.timeout=30m, train.efa=4).
func Set(overrides ...string) Option {
	return optionFunc(func(c *config) { c.sets = append(c.sets, overrides...) })
}

// Items replaces the foreach items of step: the run makes one unit per item
// given, as if the step were declared with sdk.Foreach(items...). Run refuses
// Items of a step declared without sdk.Foreach: they would make it a foreach
// step that the flow does not have.
func Items(step string, items ...string) Option {
	return optionFunc(func(c *config) { c.items[step] = append([]string{}, items...) })
}

// Stub replaces what step runs, a Command step or a Run step: each attempt of
// the step (of each item of a foreach step) calls actions in order, and the
// first that returns an error ends the attempt with it. With no actions, an
// attempt succeeds and does nothing. A later Stub of the same step replaces an
// earlier one.
func Stub(step string, actions ...Action) Option {
	return optionFunc(func(c *config) {
		if _, ok := c.stubs[step]; !ok {
			c.stubOrder = append(c.stubOrder, step)
		}
		c.stubs[step] = append([]Action{}, actions...)
		delete(c.exec, step)
	})
}

// Exec runs the Command steps named as processes of this machine, exactly as
// the flow program's run command runs them: the argv and environment of their
// pod ($(NAME) expanded), their output in the run's logs (Result.Stdout), a
// timeout that stops the process group. They take real time, which the fake
// clock follows.
func Exec(steps ...string) Option {
	return optionFunc(func(c *config) {
		for _, s := range steps {
			c.exec[s] = true
			delete(c.stubs, s)
		}
	})
}

// Config reads step defaults from the manifold.toml at path instead of the
// one in the test's working directory (the package directory, beside the
// flow), which Run reads when it is there, as the run command does; "" reads
// none. Image settings do not matter to a test run, and image_from_build is
// ignored.
func Config(path string) Option {
	return optionFunc(func(c *config) { c.cfgPath, c.cfgGiven = path, true })
}

// compileOptions turns the options into the compile's, as the run command turns
// its flags.
func (c *config) compileOptions(flow *sdk.Flow) (compile.Options, []string) {
	problems := slices.Clone(c.problems)
	o := compile.Options{Params: c.params, Overrides: map[string][]sdk.StepOption{}}
	for _, s := range c.sets {
		step, opt, err := compile.ParseSet(s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("flowtest.Set(%q): %v", s, err))
			continue
		}
		o.Overrides[step] = append(o.Overrides[step], opt)
	}
	// Items replace a foreach step's items; they do not make a step a foreach.
	spec := flow.Spec()
	declared := map[string]*sdk.StepSpec{}
	var names []string
	for i := range spec.Steps {
		declared[spec.Steps[i].Name] = &spec.Steps[i].Spec
		names = append(names, spec.Steps[i].Name)
	}
	for _, step := range slices.Sorted(maps.Keys(c.items)) {
		switch s := declared[step]; {
		case s == nil:
			problems = append(problems, fmt.Sprintf("flowtest.Items(%q): flow %s has no step %q; its steps are %s", step, spec.Name, step, strings.Join(names, ", ")))
		case s.Foreach == nil:
			problems = append(problems, fmt.Sprintf("flowtest.Items(%q): step %s of flow %s has no sdk.Foreach, so items would make it a foreach step it is not; give Items to a step declared with sdk.Foreach", step, step, spec.Name))
		default:
			o.Overrides[step] = append(o.Overrides[step], sdk.Foreach(c.items[step]...))
		}
	}
	path := c.cfgPath
	if !c.cfgGiven {
		path = compile.ConfigFile
	}
	if path != "" {
		cfg, err := compile.LoadConfig(path)
		switch {
		case err == nil:
			cfg.ImageFromBuild = false
			o.Config = cfg
		case !c.cfgGiven && errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, fs.ErrNotExist):
			problems = append(problems, fmt.Sprintf("flowtest.Config(%q): no such file", path))
		default:
			problems = append(problems, fmt.Sprintf("flowtest: %v", err))
		}
	}
	return o, problems
}

// bodies checks what the options say each step runs against the compiled flow
// f, and returns the Run steps' Go functions by step.
func (c *config) bodies(flow *sdk.Flow, f *plan.Flow) (map[string]func(*sdk.Context) error, []string) {
	var problems []string
	steps := map[string]*plan.Step{}
	var names []string
	for i := range f.Steps {
		steps[f.Steps[i].Name] = &f.Steps[i]
		names = append(names, f.Steps[i].Name)
	}
	unknown := func(what, step string) {
		problems = append(problems, fmt.Sprintf("%s: flow %s has no step %q; its steps are %s", what, f.Name, step, strings.Join(names, ", ")))
	}
	for _, step := range c.stubOrder {
		if _, stubbed := c.stubs[step]; stubbed && steps[step] == nil {
			unknown(fmt.Sprintf("flowtest.Stub(%q)", step), step)
		}
	}
	for _, step := range slices.Sorted(maps.Keys(c.exec)) {
		switch s := steps[step]; {
		case s == nil:
			unknown(fmt.Sprintf("flowtest.Exec(%q)", step), step)
		case s.Body == plan.BodyRun:
			problems = append(problems, fmt.Sprintf("flowtest.Exec(%q): %s is a Run step, whose Go function runs in the test's process already; Exec runs Command steps", step, step))
		}
	}
	run := map[string]func(*sdk.Context) error{}
	for _, d := range flow.Spec().Steps {
		if d.Spec.Run != nil {
			run[d.Name] = d.Spec.Run
		}
	}
	var bare []string
	for _, s := range f.Steps {
		_, stubbed := c.stubs[s.Name]
		if s.Body == plan.BodyCommand && !stubbed && !c.exec[s.Name] {
			bare = append(bare, fmt.Sprintf("%s (%s)", s.Name, strings.Join(s.Command, " ")))
		}
	}
	if len(bare) > 0 {
		problems = append(problems, fmt.Sprintf("flowtest: Command steps run a program a test does not run unless told: %s; "+
			"stub each with flowtest.Stub(STEP, actions...), or run it as a process with flowtest.Exec(STEP)", strings.Join(bare, ", ")))
	}
	return run, problems
}

// Run runs flow in the test's process and returns how the run went; see the
// package comment. It fails the test with t.Fatalf when the run cannot start;
// a step that fails does not fail the test by itself: check the Result.
func Run(t testing.TB, flow *sdk.Flow, opts ...Option) *Result {
	t.Helper()
	c := &config{params: map[string]string{}, items: map[string][]string{}, stubs: map[string][]Action{}, exec: map[string]bool{}}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	if flow == nil {
		t.Fatalf("flowtest.Run: no flow: pass the flow the program hands to cli.Main")
		return nil
	}
	co, problems := c.compileOptions(flow)
	if len(problems) > 0 {
		t.Fatalf("%s", strings.Join(problems, "\n"))
		return nil
	}
	f, errs := compile.Compile(flow, co)
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		t.Fatalf("flowtest: flow %s is invalid:\n%s", flow.Name(), strings.Join(msgs, "\n"))
		return nil
	}
	bodies, problems := c.bodies(flow, f)
	if len(problems) > 0 {
		t.Fatalf("%s", strings.Join(problems, "\n"))
		return nil
	}
	ctx := t.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	spec := flow.Spec()
	res, err := run(ctx, t, f, c.stubs, c.exec, bodies, &spec)
	if err != nil {
		t.Fatalf("flowtest: running flow %s: %v", f.Name, err)
		return nil
	}
	return res
}
