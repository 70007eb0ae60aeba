package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/sdk"
)

func validateCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "validate",
		Usage: "check the flow and print its steps",
		Description: "Checks every rule and prints every error with its path; exits 1 if there is any. Warnings\n" +
			"(EFA that will fall back to TCP, and the like) are printed too; --strict makes them errors.\n" +
			"Then says, for each target, whether it can express the flow (a scheduled flow of several\n" +
			"steps has no Job form, say); with --target, a target that cannot is an error too.",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Aliases: []string{"t"}, Usage: "also fail unless this target (" + strings.Join(targetNames(), ", ") + ", or all) can express the flow"},
			strictFlag,
		}, flowFlags()...),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			batchGC()
			required := map[string]bool{}
			if name := c.String("target"); c.IsSet("target") {
				chosen, err := chooseTargets(name)
				if err != nil {
					return err
				}
				for _, t := range chosen {
					required[t.Name()] = true
				}
			}
			p, err := load(c, flow)
			if err != nil {
				return err
			}
			if err := lint(c, p, c.Bool("strict")); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "flow %s is valid: %d steps\n", p.Name, len(p.Steps))
			var rows [][]string
			for i := range p.Steps {
				rows = append(rows, []string{"  " + p.Steps[i].Name, describe(&p.Steps[i])})
			}
			if err := writeTable(c.App.Writer, rows); err != nil {
				return err
			}
			failed := false
			for _, t := range targets {
				errs := t.Emit(p, emit.Discard)
				if len(errs) == 0 {
					fmt.Fprintf(c.App.Writer, "target %s: ok\n", t.Name())
					continue
				}
				w := c.App.Writer
				if required[t.Name()] {
					w, failed = c.App.ErrWriter, true
				}
				fmt.Fprintf(w, "target %s: cannot express the flow\n", t.Name())
				for _, e := range errs {
					fmt.Fprintf(w, "  %s\n", e.Error())
				}
			}
			if failed {
				return silentInvalid
			}
			return nil
		},
	}
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
