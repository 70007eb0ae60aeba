package compile

import (
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// queueing resolves a step's Kueue settings: its LocalQueue, its priority class
// and its required topology level. The queue and class names are object names
// that Kueue reads from a label, so they must be both; the level is a node
// label. Topology without a queue is an error, since only Kueue reads it.
// Labels and annotations that spell Kueue's keys by hand are errors that name
// the option to use instead.
func queueing(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	name := func(v val[string], what string) string {
		if !v.set {
			return ""
		}
		if v.v == "" {
			errs = append(errs, field.Required(v.at, what+": lowercase letters, digits, '-' and '.'"))
			return ""
		}
		for _, msg := range append(content.IsDNS1123Subdomain(v.v), content.IsLabelValue(v.v)...) {
			errs = append(errs, field.Invalid(v.at, v.v, msg))
		}
		return v.v
	}
	s.Queue = name(r.queue, "sdk.Queue names the LocalQueue in the step's namespace")
	s.Priority = name(r.priority, "sdk.Priority names a PriorityClass (and Kueue WorkloadPriorityClass)")
	if t := r.topologyLevel; t.set {
		switch {
		case t.v == "":
			errs = append(errs, field.Required(t.at, "sdk.Topology names a node label, such as cloud.provider.com/topology-block"))
		case len(content.IsLabelKey(t.v)) > 0:
			for _, msg := range content.IsLabelKey(t.v) {
				errs = append(errs, field.Invalid(t.at, t.v, msg))
			}
		case !r.queue.set:
			errs = append(errs, field.Forbidden(t.at, "Kueue's topology-aware scheduling places only queued steps: add sdk.Queue(name), or leave out sdk.Topology"))
		default:
			s.Topology = t.v
		}
	}
	for _, kv := range r.labels {
		if kv.v.Key == plan.LabelQueueName || kv.v.Key == plan.LabelPriorityClass {
			errs = append(errs, field.Forbidden(kv.at, "Kueue's label is set by sdk.Queue and sdk.Priority: use those"))
		}
	}
	for _, kv := range r.annotations {
		if kv.v.Key == plan.AnnotationRequiredTopology {
			errs = append(errs, field.Forbidden(kv.at, "Kueue's topology annotation is set by sdk.Topology: use it"))
		}
	}
	return errs
}
