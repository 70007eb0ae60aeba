package compile

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// topology places the pods of a multi-node step: each on a node of its own
// (or of its own value of sdk.Spread's label), and, when it asks for EFA or
// sdk.SameZone, all in one zone unless sdk.AnyZone. It runs after multiNode and
// resources. Given on the step itself to a one-pod step, the options are an
// error; from the flow or the config they leave such steps be.
func topology(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	if r.spread.set {
		key := r.spread.v
		if key == "" {
			errs = append(errs, field.Required(r.spread.at, "sdk.Spread names a node label, such as "+corev1.LabelHostname))
		}
		for _, msg := range content.IsLabelKey(key) {
			if key != "" {
				errs = append(errs, field.Invalid(r.spread.at, key, msg))
			}
		}
	}
	if s.Nodes <= 1 {
		for _, v := range []val[string]{r.zone, r.spread} {
			if v.set && v.layer <= stepRank {
				errs = append(errs, field.Forbidden(v.at, "places the pods of a multi-node step, and this step runs one pod: add sdk.Nodes(n), or leave the option out"))
			}
		}
		return errs
	}
	s.Apart = corev1.LabelHostname
	if r.spread.set {
		s.Apart = r.spread.v
	}
	switch {
	case r.zone.set && r.zone.v == "any":
	case r.zone.set || s.EFA > 0:
		s.Together = corev1.LabelTopologyZone
	}
	if s.Together != "" && s.Apart == s.Together {
		why := "sdk.SameZone()"
		if !r.zone.set {
			why = fmt.Sprintf("its EFA (EFA does not leave a zone, so its %d pods share one)", s.Nodes)
		}
		errs = append(errs, field.Invalid(r.spread.at, s.Apart, "spreads the pods over zones, which contradicts "+why+": add sdk.AnyZone() to let them span zones, or spread over another label"))
	}
	return errs
}
