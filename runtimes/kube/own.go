package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// A run touches only the objects it made: those labelled with its flow, its run
// ID and its UID (plan.LabelRunUID), which its record keeps so that a resume
// knows them. Every list, watch and deletion of the run selects them by
// runSelector; an object of the flow and run ID without the run's UID is
// another run's, made before this run's record was lost, and the run refuses
// to start beside it (foreign) rather than adopt, follow or delete it.

// runSelector is the label selector of the objects of the run id of flow with
// the UID uid; with uid "", of every run of flow under that ID.
func runSelector(flow, id, uid string) string {
	set := labels.Set{plan.LabelFlow: flow, plan.LabelRun: id}
	if uid != "" {
		set[plan.LabelRunUID] = uid
	}
	return labels.SelectorFromSet(set).String()
}

// selector is the label selector of the run's own objects.
func (r *runner) selector() string { return runSelector(r.Flow.Name, r.ID, r.Flow.RunUID) }

// previous returns the run recorded in dir (nil for none) and its UID, or a
// new UID for a run not recorded there (or recorded without one).
func previous(dir string) (*record.Record, string, error) {
	prev, err := record.ReadRecord(dir)
	switch {
	case err == nil && prev.UID != "":
		return prev, prev.UID, nil
	case err == nil:
		return prev, string(uuid.NewUUID()), nil
	case errors.Is(err, os.ErrNotExist):
		return nil, string(uuid.NewUUID()), nil
	}
	return nil, "", err
}

// ForeignError is what Run returns when the cluster holds objects of the flow
// under the run's ID that this run did not make (another run with this ID,
// whose record is gone): nothing was created, and nothing of theirs changed.
type ForeignError struct {
	Flow, ID string
	// Dir is the run's record.
	Dir string
	// Objects name what was found, "Kind namespace/name", and Namespaces
	// where.
	Objects    []string
	Namespaces []string
	// Kinds are the resources to delete, comma-separated.
	Kinds string
}

// Error names the objects and says what to do.
func (e *ForeignError) Error() string {
	shown := e.Objects
	more := ""
	if len(shown) > 3 {
		shown, more = shown[:3], fmt.Sprintf(" and %d more", len(e.Objects)-3)
	}
	verb := "is"
	if len(e.Objects) > 1 {
		verb = "are"
	}
	var del []string
	for _, ns := range e.Namespaces {
		del = append(del, fmt.Sprintf("`kubectl delete %s -l %s -n %s`", e.Kinds, runSelector(e.Flow, e.ID, ""), ns))
	}
	return fmt.Sprintf("run %s of flow %s: %s%s on the cluster %s not this run's: another run with this ID made %s, and this run's record (%s) does not name %s; "+
		"delete %s (%s), or pick another --run-id",
		e.ID, e.Flow, strings.Join(shown, ", "), more, verb, pronoun(len(e.Objects)), e.Dir, pronoun(len(e.Objects)), pronoun(len(e.Objects)), strings.Join(del, ", "))
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// foreign refuses a run when the cluster holds objects of its flow and run ID,
// of the kinds it creates, that are not the run's own (another UID, or none).
func (r *runner) foreign(ctx context.Context) error {
	sel := runSelector(r.Flow.Name, r.ID, "")
	e := &ForeignError{Flow: r.Flow.Name, ID: r.ID, Dir: r.Dir, Kinds: r.kinds()}
	for _, ns := range unitNamespaces(r.units) {
		found := false
		for _, gvr := range createdKinds(r.units) {
			if gvr == resourceClaimTemplateGVR {
				// A run may not list them (Needs): each goes with its step's
				// Jobs, which are listed.
				continue
			}
			var list *unstructured.UnstructuredList
			err := r.c.Retry(ctx, func(ctx context.Context) error {
				var err error
				list, err = r.c.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
				return err
			})
			if err != nil {
				return fmt.Errorf("listing the %s of run %s in namespace %s: %w", gvr.Resource, r.ID, ns, err)
			}
			for _, o := range list.Items {
				if !r.owns(&o) {
					e.Objects = append(e.Objects, o.GetKind()+" "+ns+"/"+o.GetName())
					found = true
				}
			}
		}
		if found {
			e.Namespaces = append(e.Namespaces, ns)
		}
	}
	if len(e.Objects) > 0 {
		return e
	}
	return nil
}

// owns reports whether o carries the run's labels: its flow, ID and UID.
func (r *runner) owns(o metav1.Object) bool {
	sel, err := labels.Parse(r.selector())
	return err == nil && sel.Matches(labels.Set(o.GetLabels()))
}

// existing checks that the object o of unit u, whose create found it made, is
// the run's own: made by an earlier create of this run that got no answer. It
// returns an error naming it when it is another run's.
func (r *runner) existing(ctx context.Context, u *unit, o object) error {
	if o.gvr == resourceClaimTemplateGVR {
		// Every unit of the step creates it; the run may not read it.
		return nil
	}
	var list *unstructured.UnstructuredList
	err := r.c.Retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = r.c.Dynamic.Resource(o.gvr).Namespace(u.ns).List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + o.u.GetName()})
		return err
	})
	if err != nil {
		return fmt.Errorf("reading its %s %s, which exists: %w", o.u.GetKind(), o.u.GetName(), err)
	}
	for _, it := range list.Items {
		if !r.owns(&it) {
			return fmt.Errorf("its %s %s/%s exists on the cluster and is not this run's (another run's with this ID): delete it, or pick another --run-id",
				o.u.GetKind(), u.ns, o.u.GetName())
		}
	}
	return nil
}
