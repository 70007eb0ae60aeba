//go:build !manifold_image

package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
)

// onRun returns the Argo and Airflow sides of a command that acts on run, each
// reading runid.Latest first as the flow's run on its target that started
// last: the last one runs list --target lists.
func onRun(c *ucli.Context, run string, onArgo, onAirflow func(p *plan.Flow, run string) error) (argoSide, airflowSide func(*plan.Flow) error) {
	argoSide = func(p *plan.Flow) error {
		if run != runid.Latest {
			return onArgo(p, run)
		}
		a, err := argoClient(c, p)
		if err != nil {
			return err
		}
		runs, err := a.List(c.Context)
		if err != nil {
			return invalidErr(err)
		}
		if len(runs) == 0 {
			return invalidErr(fmt.Errorf("no run of flow %s on Argo in namespace %s of %s: trigger one first", p.Name, a.Namespace(), a.Where()))
		}
		return onArgo(p, runs[len(runs)-1].Name)
	}
	airflowSide = func(p *plan.Flow) error {
		if run != runid.Latest {
			return onAirflow(p, run)
		}
		cl, id, err := airflowDAG(c, p)
		if err != nil {
			return err
		}
		runs, err := cl.Runs(c.Context, id, 1)
		if err != nil {
			return invalidErr(err)
		}
		if len(runs) == 0 {
			return invalidErr(fmt.Errorf("no run of DAG %s in Airflow at %s: trigger one first", id, cl.URL()))
		}
		return onAirflow(p, runs[len(runs)-1].ID)
	}
	return argoSide, airflowSide
}
