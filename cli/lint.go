package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
)

// strictFlag makes the flow's warnings errors.
var strictFlag = &ucli.BoolFlag{Name: "strict", Usage: "treat warnings (EFA that falls back to TCP, and the like) as errors"}

// lint prints p's warnings to stderr, one per line. With --strict (where the
// command has it) they are errors: printed as such, and the command fails before
// it writes or runs anything.
func lint(c *ucli.Context, p *plan.Flow, strict bool) error {
	warnings := compile.Lint(p)
	if len(warnings) == 0 {
		return nil
	}
	if strict {
		printErrors(c.App.ErrWriter, p.Name+" (--strict)", warnings)
		return silentInvalid
	}
	for _, w := range warnings {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w.Error())
	}
	return nil
}
