package argo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"

	"github.com/manifoldflow/manifold/artifact"
	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// made takes the units of a fan-out the dag core made once the list it fans
// out over was known (or the one unit of a step not taken): the follower
// follows each as the node of its item, and records it.
//
// A fan-out of more than emit/argo's MaxItems items fails, as Argo fails it,
// with the same message, as one unit of the whole step.
func (f *follower) made(us []*dag.Unit) error {
	if len(us) > eargo.MaxItems {
		return errors.New(eargo.TooMany(us[0].Step, len(us)))
	}
	for _, du := range us {
		u := &unit{Unit: du}
		f.unitsMu.Lock()
		f.units = append(f.units, u)
		f.unitsMu.Unlock()
		f.byKey[unitKey(du.Step.Name, du.Index)] = u
		if err := record.WriteTask(f.Dir, f.Task(du)); err != nil {
			return err
		}
	}
	return nil
}

// valueStore is the store through which the dag core reads, for the
// follower, the values a dynamic flow's steps published (plan.EnvValues):
// the output parameters of the steps' nodes in the Workflow as last seen,
// which Argo read from the files the steps wrote, and which its own withParam
// and when read. It holds nothing else.
type valueStore struct{ f *follower }

// Get returns the value <step>/<name>.json: the output parameter name of the
// node that ran step and succeeded.
func (v *valueStore) Get(_ context.Context, key string) ([]byte, error) {
	step, name, ok := artifact.SplitKey(key)
	if w := v.f.latest; w != nil && ok {
		for _, n := range w.Status.Nodes {
			if n.Type != wfv1.NodeTypePod || n.TemplateName != step || n.Phase != wfv1.NodeSucceeded || n.Outputs == nil {
				continue
			}
			for _, p := range n.Outputs.Parameters {
				if p.Name == name && p.Value != nil {
					return []byte(p.Value.String()), nil
				}
			}
		}
	}
	return nil, fmt.Errorf("%s: %w", v.Location(key), fs.ErrNotExist)
}

// Put refuses: the follower writes no value.
func (v *valueStore) Put(_ context.Context, key string, _ []byte) error {
	return fmt.Errorf("%s: the follower of an Argo run writes no artifact", v.Location(key))
}

// Location says where key is read: the output parameter of its step's node.
func (v *valueStore) Location(key string) string {
	step, name, ok := artifact.SplitKey(key)
	if !ok {
		return fmt.Sprintf("%s, not a value a step published, of Workflow %s", key, v.f.name)
	}
	return fmt.Sprintf("output parameter %s of step %s of Workflow %s", name, step, v.f.name)
}
