package cli

import (
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/sdk"
)

// App returns the command line of flow's program as Main runs it, without
// running it, for tools that render its commands and flags (the command-line
// reference under docs/ is generated from it).
func App(flow *sdk.Flow) *ucli.App {
	return newApp(flow, flow.Name(), io.Discard, io.Discard)
}
