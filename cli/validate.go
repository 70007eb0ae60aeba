package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	ucli "github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/sdk"
)

func validateCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "validate",
		Usage: "check the flow and print its steps, and which targets can take it",
		Description: "Checks every rule and prints every error with its path; exits 1 if there is any. Warnings\n" +
			"(EFA that will fall back to TCP, values that look like credentials, and the like) are printed too.\n" +
			"Then says, for each target, whether it can express the flow (a scheduled flow of several\n" +
			"steps has no Job form, say), and which targets can take it; and which steps' pods need more\n" +
			"than Pod Security's restricted level, and why. A valid flow that some target\n" +
			"cannot take still exits 0; --target T (repeatable, or a comma list) exits 1 when one of\n" +
			"the targets named cannot take it, and --strict when any target cannot, or there is a warning.",
		Flags: append([]ucli.Flag{
			&ucli.StringSliceFlag{Name: "target", Aliases: []string{"t"}, Usage: "fail unless `TARGET` can express the flow: " + strings.Join(targetNames(), ", ") + ", or all (repeatable, or a comma list)"},
			&ucli.BoolFlag{Name: "strict", Usage: "treat warnings (EFA that falls back to TCP, values that look like credentials, and the like) as errors, and fail unless every target can express the flow"},
			outputFlag(),
		}, flowFlags()...),
		Action: func(c *ucli.Context) error { return validate(c, flow) },
	}
}

// validate is the validate command's action: it checks the flow and says which
// targets can take it, as a table or as the document --output asks for.
func validate(c *ucli.Context, flow *sdk.Flow) error {
	if err := noArgs(c); err != nil {
		return err
	}
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	batchGC()
	required, err := requiredTargets(c)
	if err != nil {
		return err
	}
	if format != output.Table {
		doc, err := validation(c, flow, required)
		if err != nil {
			return err
		}
		if err := output.Write(c.App.Writer, format, doc); err != nil {
			return err
		}
		if !doc.OK {
			return silentInvalid
		}
		return nil
	}
	p, err := load(c, flow)
	if err != nil {
		return err
	}
	if err := lint(c, p, c.Bool("strict")); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "flow %s is valid: %s\n", p.Name, display.Count(len(p.Steps), "step"))
	var rows [][]string
	for i := range p.Steps {
		rows = append(rows, []string{"  " + p.Steps[i].Name, describe(&p.Steps[i])})
	}
	if err := writeTable(c.App.Writer, rows); err != nil {
		return err
	}
	failed := printTargets(c, p, required)
	if err := printPodSecurity(c.App.Writer, p); err != nil {
		return err
	}
	for _, f := range failed {
		fmt.Fprintf(c.App.ErrWriter, "error: %s\n", f)
	}
	if len(failed) > 0 {
		return silentInvalid
	}
	return nil
}

// requiredTargets maps the targets that must express the flow to the flag that
// asks it: those --target names, or with --strict every target.
func requiredTargets(c *ucli.Context) (map[string]string, error) {
	required := map[string]string{} // target → the flag that asks it
	for _, list := range c.StringSlice("target") {
		for _, name := range strings.Split(list, ",") {
			chosen, err := chooseTargets(strings.TrimSpace(name))
			if err != nil {
				return nil, err
			}
			for _, t := range chosen {
				required[t.Name()] = "--target"
			}
		}
	}
	if c.Bool("strict") {
		for _, t := range targets {
			required[t.Name()] = "--strict"
		}
	}
	return required, nil
}

// printTargets says, for each target, whether it can express p and why not,
// then which targets can take it. It returns a failure for each target that
// cannot and that required asks for; those targets' errors go to standard
// error.
func printTargets(c *ucli.Context, p *plan.Flow, required map[string]string) (failed []string) {
	// Whether a target can express the flow is whether it can emit it: every
	// target is emitted, its files thrown away, side by side as compile -o
	// emits them.
	emitted := emitAll(p)
	var can, cannot []string
	for i, t := range targets {
		errs := emitted[i]
		if len(errs) == 0 {
			can = append(can, t.Name())
			fmt.Fprintf(c.App.Writer, "target %s: ok\n", t.Name())
			continue
		}
		cannot = append(cannot, t.Name())
		w := c.App.Writer
		if flag := required[t.Name()]; flag != "" {
			w = c.App.ErrWriter
			failed = append(failed, fmt.Sprintf("target %s cannot express the flow, and %s asks it to", t.Name(), flag))
		}
		fmt.Fprintf(w, "target %s: cannot express the flow\n", t.Name())
		for _, e := range errs {
			fmt.Fprintf(w, "  %s\n", e.Error())
		}
	}
	switch {
	case len(cannot) == 0:
		fmt.Fprintf(c.App.Writer, "every target can take the flow: %s\n", strings.Join(can, ", "))
	case len(can) == 0:
		fmt.Fprintf(c.App.Writer, "no target can take the flow\n")
	default:
		fmt.Fprintf(c.App.Writer, "targets that can take the flow: %s (not %s)\n", strings.Join(can, ", "), strings.Join(cannot, ", "))
	}
	return failed
}

// emitAll emits p to every target, side by side as compile -o emits them, its
// files thrown away, and returns each target's errors: whether a target can
// express the flow is whether it can emit it.
func emitAll(p *plan.Flow) []field.ErrorList {
	emitted := make([]field.ErrorList, len(targets))
	sideBySide(len(targets), func(i int) { emitted[i] = targets[i].Emit(p, emit.Discard) })
	return emitted
}

// validation is what validate says of flow, as a document: required maps the
// targets asked for to the flag that asks.
func validation(c *ucli.Context, flow *sdk.Flow, required map[string]string) (*output.Validation, error) {
	doc := output.NewValidation(flowName(flow))
	opts, err := options(c, flow)
	if err != nil {
		return nil, err
	}
	p, errs := compile.Compile(flow, opts)
	for _, e := range errs {
		doc.Errors = append(doc.Errors, output.Problem{Path: e.Field, Message: e.ErrorBody()})
	}
	if len(errs) > 0 {
		return &doc, nil
	}
	for _, w := range compile.Lint(p) {
		pr := output.Problem{Path: w.Field, Message: w.Detail}
		if c.Bool("strict") {
			doc.Errors = append(doc.Errors, pr)
		} else {
			doc.Warnings = append(doc.Warnings, pr)
		}
	}
	if len(doc.Errors) > 0 {
		return &doc, nil
	}
	doc.Valid, doc.OK = true, true
	for i := range p.Steps {
		s := &p.Steps[i]
		ps := emit.StepPodSecurity(p, s)
		doc.Steps = append(doc.Steps, output.Step{Name: s.Name, Summary: describe(s), PodSecurity: ps.Level, PodSecurityTodo: ps.Todo})
	}
	for i, errs := range emitAll(p) {
		t := output.Target{Name: targets[i].Name(), OK: len(errs) == 0, Required: required[targets[i].Name()] != ""}
		for _, e := range errs {
			t.Errors = append(t.Errors, output.Problem{Path: e.Field, Message: e.ErrorBody()})
		}
		if t.Required && !t.OK {
			doc.OK = false
		}
		doc.Targets = append(doc.Targets, t)
	}
	return &doc, nil
}

// printPodSecurity says which steps' pods meet Pod Security's restricted level,
// and for each other step the level its pod needs and which option needs it or
// would make it restricted.
func printPodSecurity(out io.Writer, p *plan.Flow) error {
	var rows [][]string
	for i := range p.Steps {
		s := &p.Steps[i]
		if ps := emit.StepPodSecurity(p, s); ps.Level != emit.LevelRestricted {
			rows = append(rows, []string{"  " + s.Name, ps.Level + ": " + ps.Todo})
		}
	}
	switch len(rows) {
	case 0:
		_, err := fmt.Fprintln(out, "pod security: every step's pod meets the restricted level")
		return err
	case len(p.Steps):
		fmt.Fprintln(out, "pod security: no step's pod meets the restricted level")
	default:
		fmt.Fprintln(out, "pod security: every step's pod meets the restricted level except:")
	}
	return writeTable(out, rows)
}

// writeTable writes rows as aligned columns, two spaces apart, without trailing
// blanks.
func writeTable(out io.Writer, rows [][]string) error {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, row := range rows {
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, line := range strings.SplitAfter(b.String(), "\n") {
		if line == "" {
			continue
		}
		if _, err := fmt.Fprintln(out, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	return nil
}
