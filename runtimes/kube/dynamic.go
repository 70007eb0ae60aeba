package kube

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/artifact/s3store"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
)

// checkDynamic says why a run of f as as cannot run f's dynamic steps (a
// fan-out over, or a branch on, a value found at run time), nil when it can:
// the runner reads those values from the run's artifact store when the steps
// that put them have succeeded, so the flow needs one that this machine can
// read, an S3 bucket; and the steps are run as Jobs.
func checkDynamic(f *plan.Flow, as string) field.ErrorList {
	var errs field.ErrorList
	for i := range f.Steps {
		s := &f.Steps[i]
		ref, option := s.ForeachOf, "foreachOf"
		if ref == nil {
			if s.When == nil {
				continue
			}
			ref, option = &s.When.Ref, "when"
		}
		at := field.NewPath("steps").Key(s.Name).Child(option)
		what := fmt.Sprintf("run --kube reads %s's %s from the run's artifact store once %s has put it", ref.Step, ref.Name, ref.Step)
		switch a := f.Artifacts; {
		case as == AsJobSet:
			errs = append(errs, field.Forbidden(at, "run --kube --as jobset does not run a step that fans out over or branches on a value found at run time: run the flow as Jobs (leave out --as jobset)"))
		case a == nil:
			errs = append(errs, field.Forbidden(at, what+", and the flow has none: set artifacts = \"s3://bucket/prefix\" in manifold.toml, or pass --artifacts s3://bucket/prefix"))
		case a.Claim != "":
			errs = append(errs, field.Forbidden(at, what+", and a volume claim ("+a.Claim+") is read only in the cluster's pods, not on this machine: use an S3 store (artifacts = \"s3://bucket/prefix\")"))
		}
	}
	return errs
}

// dynamicStore opens, for a dynamic flow, the run's place in its S3 store,
// where the runner reads the values its steps fan out over and branch on; nil
// for a flow with none.
func dynamicStore(ctx context.Context, f *plan.Flow, id string) (artifact.Store, error) {
	if f.Dynamic() == nil {
		return nil, nil
	}
	a := f.Artifacts
	s, err := s3store.New(ctx, artifact.RunLocation(a.URL, f.Name, id), s3store.Options{Endpoint: a.Endpoint})
	if err != nil {
		return nil, fmt.Errorf("the run's artifact store, where its dynamic steps' values are read: %w", err)
	}
	return s, nil
}

// made takes the units that a fan-out over a value found at run time makes,
// or the one unit of such a step that ended without items
// (dag.Dynamic.Made), and adds them to the run with their objects: one Indexed
// Job and the ConfigMap of the items, or a Job per item where job.NotIndexed
// says why. A resumed run matches its fan-out with what the cluster holds, as
// it does a static one (adoptFanOut): the items that succeeded before are not
// run again, a Job still running is followed where it is, and one that ended
// or failed an index is deleted, the items yet to succeed running again (each
// as a Job of its own when some succeeded).
func (r *runner) made(ctx context.Context, us []*dag.Unit) error {
	if len(us) == 0 {
		return nil
	}
	s := us[0].Step
	if us[0].Index < 0 {
		r.add([]*unit{{Unit: us[0], ns: r.namespaceOf(s), kind: "Job", workload: jobWorkload{}, name: job.JobName(r.Flow, s, -1)}}, true)
		return nil
	}
	texts := make([]string, len(us))
	for i, u := range us {
		texts[i] = u.Item
	}
	var objs []any
	if t := emit.ClaimTemplate(r.Flow, s); t != nil {
		objs = append(objs, t)
	}
	if why := job.NotIndexed(s, texts); why != "" {
		r.Disp.Note("step %s runs each of its %d items as a Job of its own: %s", s.Name, len(texts), why)
		for _, j := range job.ItemJobs(r.Flow, s, texts) {
			objs = append(objs, j)
		}
	} else {
		cm, j := job.FanOut(r.Flow, s, texts, true)
		objs = append(objs, cm, j)
	}
	units, errs := group(r.Flow, objs, r.c.Namespace, us)
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	if r.resumed {
		for _, u := range units {
			if err := r.Resume(u.Unit); err != nil {
				return err
			}
		}
		if fo := units[0].fan; fo != nil {
			stale, err := r.adoptFanOut(fo)
			if err != nil {
				return err
			}
			if err := r.deleteStale(ctx, stale); err != nil {
				return err
			}
		} else {
			for _, u := range units {
				if u.Earlier {
					u.created, u.seen = true, true
				}
			}
		}
	}
	r.add(units, true)
	return nil
}

// namespaceOf is the namespace of step s's objects.
func (r *runner) namespaceOf(s *plan.Step) string {
	if s.Namespace != "" {
		return s.Namespace
	}
	return r.c.Namespace
}
