package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/sdk"
)

// localRun opens the run id recorded here (with --store and --endpoint):
// runid.Latest is the flow's run that started last.
func localRun(c *ucli.Context, flow *sdk.Flow, id string) (*client.Run, error) {
	cl := openClient(c)
	if id == runid.Latest {
		return cl.Latest(flowName(flow))
	}
	return cl.Run(id)
}
