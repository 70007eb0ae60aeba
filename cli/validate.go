package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/sdk"
)

func validateCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:        "validate",
		Usage:       "check the flow and print its steps",
		Description: "Checks every rule and prints every error with its path; exits 1 if there is any.",
		Flags:       flowFlags(),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			p, err := load(c, flow)
			if err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "flow %s is valid: %d steps\n", p.Name, len(p.Steps))
			var b strings.Builder
			w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
			for i := range p.Steps {
				fmt.Fprintf(w, "  %s\t%s\n", p.Steps[i].Name, describe(&p.Steps[i]))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			for _, line := range strings.SplitAfter(b.String(), "\n") {
				fmt.Fprint(c.App.Writer, strings.TrimRight(line, " \n"))
				if strings.HasSuffix(line, "\n") {
					fmt.Fprintln(c.App.Writer)
				}
			}
			return nil
		},
	}
}
