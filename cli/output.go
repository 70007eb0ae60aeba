package cli

import (
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/output"
)

// outputFlag is -o/--output of the commands that print a document
// (package output) as well as a table.
func outputFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: output.Table, Usage: "print a `FORMAT`: " + strings.Join(output.Formats, ", ") + " (docs/reference/output.md)"}
}

// outputFormat returns --output, refusing a format there is none of.
func outputFormat(c *ucli.Context) (string, error) {
	f := c.String("output")
	if !slices.Contains(output.Formats, f) {
		return "", usageErr("--output %q: choose %s", f, strings.Join(output.Formats, ", "))
	}
	return f, nil
}
