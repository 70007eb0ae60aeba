package emit

import (
	"maps"
	"strings"

	"github.com/manifoldflow/manifold/plan"
)

// ObjectLabels returns the labels of an object that runs a step's pod: the pod's own,
// plus the item's index for an object made for one foreach item (not for the one
// object of all a fan-out's items).
func ObjectLabels(pod map[string]string, item *Item) map[string]string {
	if item == nil || item.Items != "" {
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

// QueueLabels returns the labels by which Kueue admits the object that runs
// step s (its Job, its JobSet, or the bare pod of a single-node Argo or Airflow
// step): the LocalQueue and, with a priority, the WorkloadPriorityClass. It
// returns nil for a step without a queue.
func QueueLabels(s *plan.Step) map[string]string {
	if s.Queue == "" {
		return nil
	}
	labels := map[string]string{plan.LabelQueueName: s.Queue}
	if s.Priority != "" {
		labels[plan.LabelPriorityClass] = s.Priority
	}
	return labels
}

// Queued returns labels with step s's QueueLabels added, in a new map when it
// adds any; labels itself is never changed.
func Queued(labels map[string]string, s *plan.Step) map[string]string {
	q := QueueLabels(s)
	if q == nil {
		return labels
	}
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, q)
	return out
}

// Suspend is the suspend field of the Job or JobSet of step s: true for a
// queued step. Kueue's webhook suspends a labelled Job or JobSet when it is
// created, but only where that webhook is reached; created suspended, the
// object never runs a pod before Kueue admits it, whatever the webhook does.
// Kueue's own examples create their Jobs suspended for the same reason.
func Suspend(s *plan.Step) *bool {
	if s.Queue == "" {
		return nil
	}
	return new(true)
}
