package cli

import (
	"fmt"
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
			w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
			for i := range p.Steps {
				fmt.Fprintf(w, "  %s\t%s\n", p.Steps[i].Name, describe(&p.Steps[i]))
			}
			return w.Flush()
		},
	}
}
