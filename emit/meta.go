package emit

import (
	"maps"
	"strings"

	"github.com/manifoldflow/manifold/plan"
)

// ObjectLabels returns the labels of an object that runs a step's pod: the pod's own,
// plus the item's index for an object made for one foreach item.
func ObjectLabels(pod map[string]string, item *Item) map[string]string {
	if item == nil {
		return pod
	}
	labels := maps.Clone(pod)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[plan.LabelIndex] = item.Index
	return labels
}

// AfterAnnotations returns the annotations that record the steps s waits for, nil when
// it waits for none.
func AfterAnnotations(s *plan.Step) map[string]string {
	if len(s.After) == 0 {
		return nil
	}
	return map[string]string{plan.AnnotationAfter: strings.Join(s.After, ",")}
}
