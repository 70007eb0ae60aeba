package emit

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// runsDynamic says where a dynamic flow runs.
const runsDynamic = "run the flow on this machine (run), in a test (flowtest), on the cluster (run --kube, with an S3 artifact store), on Argo (--target argo, with an artifact store) or on Airflow (--target airflow, with the values put by Run steps)"

// Static returns, for each dynamic step of f (a fan-out over a value found at
// run time, sdk.ForeachOf, or a branch on one, sdk.When), that target cannot
// express it and why, with what to do instead.
func Static(f *plan.Flow, target, why string) field.ErrorList {
	var errs field.ErrorList
	for i := range f.Steps {
		s := &f.Steps[i]
		at := field.NewPath("steps").Key(s.Name)
		if s.ForeachOf != nil {
			errs = append(errs, field.Forbidden(at.Child("foreachOf"), fmt.Sprintf(
				"the %s target %s, so it cannot fan out over %s's %s, which is found at run time; "+runsDynamic, target, why, s.ForeachOf.Step, s.ForeachOf.Name)))
		}
		if s.When != nil {
			errs = append(errs, field.Forbidden(at.Child("when"), fmt.Sprintf(
				"the %s target %s, so it cannot run the step only when %s's %s is %s, which is known at run time; "+runsDynamic, target, why, s.When.Ref.Step, s.When.Ref.Name, s.When.Value)))
		}
	}
	return errs
}
