package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// The Airflow side of the flow's lifecycle commands (see lifecycle.go). This
// build has none: each refuses --target airflow.

var errNoAirflow = usageErr("--target airflow: not available in this build")

func airflowFlags() []ucli.Flag { return nil }

func airflowDeploy(*ucli.Context, *sdk.Flow, *plan.Flow) error   { return errNoAirflow }
func airflowUndeploy(*ucli.Context, *sdk.Flow, *plan.Flow) error { return errNoAirflow }
func airflowTrigger(*ucli.Context, *sdk.Flow, *plan.Flow, map[string]string) error {
	return errNoAirflow
}
func airflowRunsList(*ucli.Context, *sdk.Flow, *plan.Flow) error             { return errNoAirflow }
func airflowRunsShow(*ucli.Context, *sdk.Flow, *plan.Flow, string) error     { return errNoAirflow }
func airflowLogs(*ucli.Context, *sdk.Flow, *plan.Flow, string, string) error { return errNoAirflow }
func airflowStop(*ucli.Context, *sdk.Flow, *plan.Flow, string) error         { return errNoAirflow }
func airflowRetry(*ucli.Context, *sdk.Flow, *plan.Flow, string) error        { return errNoAirflow }
