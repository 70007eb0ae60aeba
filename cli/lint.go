package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
)

// strictFlag makes the flow's warnings errors.
var strictFlag = &ucli.BoolFlag{Name: "strict", Usage: "treat warnings (EFA that falls back to TCP, values that look like credentials, and the like) as errors"}

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
	for i, w := range warnings {
		if i == maxWarnings {
			fmt.Fprintf(c.App.ErrWriter, "warning: %s; validate --strict lists every one\n", display.Count(len(warnings)-i, "more warning"))
			break
		}
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", w.Error())
	}
	return nil
}

// maxWarnings bounds the warnings printed: a generated flow of thousands of
// steps may have one per step.
const maxWarnings = 20
