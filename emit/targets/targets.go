// Package targets is the registry of the emitters a flow compiles to: the one
// place that lists them, for the command line and for every test that walks
// them all.
package targets

import (
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
)

// all lists the targets in the order they are emitted side by side and their
// outputs are joined.
var all = []emit.Target{job.Target{}, jobset.Target{}, argo.Target{}, airflow.Target{}}

// All returns every target, in emit order: job, jobset, argo, airflow. The
// slice is the caller's own.
func All() []emit.Target {
	return append([]emit.Target(nil), all...)
}

// Named returns the target whose Name is name, and whether there is one.
func Named(name string) (emit.Target, bool) {
	for _, t := range all {
		if t.Name() == name {
			return t, true
		}
	}
	return nil, false
}

// Names returns the names of every target, in emit order.
func Names() []string {
	names := make([]string, 0, len(all))
	for _, t := range all {
		names = append(names, t.Name())
	}
	return names
}
