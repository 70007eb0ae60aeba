//go:build !manifold_image

package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/sdk"
)

// engine is what the lifecycle commands, and runs list, runs show and logs
// with --target, ask of the engine a flow is deployed to and runs on: Argo
// Workflows or Airflow. Each method does what its command says, reading the
// command's flags, and prints what it did; one an engine cannot do is refused
// with a usage error that says what to do instead.
type engine interface {
	// Deploy puts the flow p on the engine, where Trigger runs it.
	Deploy(p *plan.Flow) error
	// Undeploy removes what Deploy made for p, and nothing else.
	Undeploy(p *plan.Flow) error
	// Trigger starts a run of p with params (names of p's params) and, with
	// --wait, follows it to its end.
	Trigger(p *plan.Flow, params map[string]string) error
	// Latest returns the name of p's run on the engine that started last.
	Latest(p *plan.Flow) (string, error)
	// Stop stops run: its running steps are stopped and no other starts.
	Stop(p *plan.Flow, run string) error
	// Suspend suspends run: its running steps finish and no other starts.
	Suspend(p *plan.Flow, run string) error
	// Unsuspend lets a run Suspend suspended go on.
	Unsuspend(p *plan.Flow, run string) error
	// Retry runs again the failed steps of run and, with --wait, follows it.
	Retry(p *plan.Flow, run string) error
	// List prints p's runs on the engine.
	List(p *plan.Flow) error
	// Show prints run and its steps.
	Show(p *plan.Flow, run string) error
	// Logs prints the logs of run's step, or of every step when step is "".
	Logs(p *plan.Flow, run, step string) error
}

// engineOf is the engine of target (targetArgo or targetAirflow) for the
// command c of flow.
func engineOf(c *ucli.Context, flow *sdk.Flow, target string) engine {
	if target == targetArgo {
		return argoEngine{c}
	}
	return airflowEngine{c: c, name: flowName(flow)}
}

// runOf is run, with runid.Latest read as p's run on e that started last: the
// last one runs list --target lists.
func runOf(e engine, p *plan.Flow, run string) (string, error) {
	if run != runid.Latest {
		return run, nil
	}
	return e.Latest(p)
}
