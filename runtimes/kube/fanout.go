package kube

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// configMapGVR is the resource of the ConfigMap that holds a fan-out's items.
var configMapGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// fanOut is a foreach step run as one Indexed Job (job.FanOut), after the
// ConfigMap of its items. Each item is a unit of its own, in units, and they
// share the two objects: they are created once, for all of them, and each
// item reads its own state from the Job's pods of its index and from what the
// Job's status says of that index.
type fanOut struct {
	ns, name string
	units    []*unit // by index
	created  bool
	// What the Job last said, read once for each version of it (changes):
	// the indexes that succeeded and failed, and what, when it changes,
	// concerns every item (sig: suspended, a Failed condition).
	rv                string
	completed, failed []bool
	sig               string
}

// key is the watcher's key of the fan-out's Job.
func (fo *fanOut) key() string { return unitKey(fo.ns, fo.name) }

// itemKey is the watcher's key of item index of the Job named name in ns.
func itemKey(ns, name, index string) string { return unitKey(ns, name) + "#" + index }

// changes reads what the Job's status says now, if it changed since it was
// last read, and returns the items it concerns: those whose index it now says
// succeeded or failed, or every item when the Job is gone, first seen, or
// suspended or failed as a whole since.
func (fo *fanOut) changes(w *watcher) []*unit {
	j := w.job(fo.ns, fo.name)
	if j == nil {
		fo.rv = ""
		return fo.units
	}
	if j.ResourceVersion == fo.rv {
		return nil
	}
	first := fo.rv == ""
	fo.rv = j.ResourceVersion
	n := len(fo.units)
	completed, failed := parseIndexes(j.Status.CompletedIndexes, n), parseIndexes(ptr.Deref(j.Status.FailedIndexes, ""), n)
	sig := fmt.Sprint(j.Spec.Suspend != nil && *j.Spec.Suspend, jobFailure(j) != nil)
	all := first || sig != fo.sig || len(fo.completed) != n
	var out []*unit
	for i, u := range fo.units {
		if all || completed[i] != fo.completed[i] || failed[i] != fo.failed[i] {
			out = append(out, u)
		}
	}
	fo.completed, fo.failed, fo.sig = completed, failed, sig
	return out
}

// jobFailure returns the Job's Failed condition when it fails the Job as a
// whole, not only the items whose indexes failed; nil when it has none.
func jobFailure(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason != batchv1.JobReasonFailedIndexes {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

// parseIndexes reads a Job's list of indexes ("1,3-5,7") into which of n
// indexes it holds; what it cannot read, it leaves out.
func parseIndexes(s string, n int) []bool {
	out := make([]bool, n)
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if ok {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for i := max(a, 0); i <= b && i < n; i++ {
			out[i] = true
		}
	}
	return out
}

// indexedWorkload is the workload of an item of a fan-out: its index of the
// fan-out's Indexed Job.
type indexedWorkload struct{}

var _ workload = indexedWorkload{}

// read fills ob from the Job of unit u's fan-out, for u's index: succeeded
// when a pod of the index exited 0 or the Job says the index completed;
// failed when the Job says the index failed (its pods failed more often than
// the step's retries allow), or when the Job failed as a whole; its failed
// pods counted as attempts that ended; and the index's pods.
func (indexedWorkload) read(w *watcher, u *unit, ob *observed) bool {
	j := w.job(u.ns, u.name)
	if j == nil {
		return false
	}
	fo, i := u.fan, u.Index
	ob.exists, ob.created = true, j.CreationTimestamp.Time
	ob.pods = nil
	failedPods := 0
	for _, p := range w.pods(u.ns, podIndexKey, indexValue(u.name, strconv.Itoa(i))) {
		if p.Labels[batchv1.ControllerUidLabel] != string(j.UID) {
			continue
		}
		ob.pods = append(ob.pods, p)
		if p.Status.Phase == corev1.PodFailed {
			failedPods++
		}
		if exitedZero(p) {
			ob.succeeded = true
		}
	}
	ob.waiting = len(ob.pods) == 0 && (j.Status.Active > 0 || j.Status.Succeeded > 0 || j.Status.Failed > 0)
	known := len(fo.completed) == len(fo.units)
	switch c := jobFailure(j); {
	case ob.succeeded || known && fo.completed[i]:
		ob.succeeded = true
	case known && fo.failed[i]:
		ob.end(time.Time{}, false, batchv1.JobReasonFailedIndexes,
			fmt.Sprintf("index %d failed %s, past its backoffLimitPerIndex of %d", i, times(failedPods), u.Step.Retry))
	case c != nil:
		ob.end(c.LastTransitionTime.Time, false, c.Reason, c.Message)
	}
	ob.attempt = min(failedPods+1, u.Step.Retry+1)
	if ob.failed {
		ob.attempt = max(1, min(failedPods, u.Step.Retry+1))
	}
	if u.Step.Queue != "" && j.Spec.Suspend != nil && *j.Spec.Suspend {
		ob.queued, ob.kueueSaid = w.queued(u.ns, j.UID, u.Step.Queue)
	}
	return true
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

// key is the watcher's key of unit u: its Job's or JobSet's, or for an item
// of a fan-out, the item's (itemKey).
func (u *unit) key() string {
	if u.fan != nil {
		return itemKey(u.ns, u.name, strconv.Itoa(u.Index))
	}
	return unitKey(u.ns, u.name)
}

// owner reports whether u creates, dry-runs and deletes its objects: every
// unit but the items of a fan-out after its first, whose objects the first
// holds for all.
func (u *unit) owner() bool { return u.fan == nil || u.fan.units[0] == u }

// add adds units to the run, after those it has; to its DAG too unless
// they come from the DAG (dag.Dynamic.Made), which adds them itself.
func (r *runner) add(units []*unit, fromDAG bool) {
	for _, u := range units {
		if !fromDAG {
			r.Add(u.Unit)
		}
		u.pos = len(r.units)
		r.units = append(r.units, u)
		r.byUnit[u.Unit] = u
		r.byKey[u.key()] = u
		if u.fan != nil {
			r.fanOuts[u.fan.key()] = u.fan
		}
	}
}

// fanOutUnits returns the units of items, the items of step s run as one
// fan-out whose objects are objects (the last its Indexed Job).
func fanOutUnits(s *plan.Step, objects []object, items []*dag.Unit) []*unit {
	j := objects[len(objects)-1].u
	fo := &fanOut{ns: j.GetNamespace(), name: j.GetName()}
	for _, du := range items {
		fo.units = append(fo.units, &unit{Unit: du, ns: fo.ns, kind: "Job", workload: indexedWorkload{}, name: fo.name, pods: 1, objects: objects, fan: fo})
	}
	return fo.units
}

// adoptFanOut matches what the cluster holds of fan-out fo of a resumed run,
// as adopt does for a unit: an item that succeeded is not run again; while
// the Job runs with no index failed (and its step is not to run again), the
// others are watched where they are. A Job that ended, or failed an index, or
// whose step runs again, goes (it returns a unit of its objects, to delete),
// and its items yet to succeed run again: as a fan-out again when none of
// them succeeded before, else each as a Job of its own, since an Indexed Job
// runs every index.
func (r *runner) adoptFanOut(fo *fanOut) ([]*unit, error) {
	fo.changes(r.w)
	j := r.w.job(fo.ns, fo.name)
	rerun := r.Rerun[fo.units[0].Step.Name]
	gone := j != nil && (rerun || jobEnd(j) != nil || slices.Contains(fo.failed, true))
	var rest []*unit
	for _, u := range fo.units {
		ob := r.observe(u)
		switch {
		case rerun:
			rest = append(rest, u)
		case ob.exists && ob.succeeded:
			u.Earlier, u.created, u.seen = true, true, true
			if r.Task(u.Unit).State != record.Succeeded {
				r.Update(u.Unit, func(t *record.Task) { adopted(t, ob, time.Now()) })
			}
		case u.Earlier:
			u.created, u.seen = true, true
		case ob.exists && !gone:
			u.created, u.seen = true, true
			r.Update(u.Unit, func(t *record.Task) { adopted(t, ob, time.Now()) })
		default:
			rest = append(rest, u)
		}
	}
	var stale []*unit
	if j != nil && gone {
		old := *fo.units[0]
		stale = append(stale, &old)
	}
	switch {
	case len(rest) == len(fo.units):
		fo.created, fo.rv = false, ""
	case len(rest) > 0:
		if err := r.split(rest); err != nil {
			return nil, err
		}
	}
	return stale, nil
}

// jobEnd returns the condition that ended Job j, Complete or Failed (the
// last, should it have both); nil while it runs.
func jobEnd(j *batchv1.Job) *batchv1.JobCondition {
	var end *batchv1.JobCondition
	for i, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) {
			end = &j.Status.Conditions[i]
		}
	}
	return end
}

// split makes each of units, items of a fan-out, a Job of its own
// (job.New, with the item's own MANIFOLD_ITEM), for a resumed run that runs
// some of a fan-out's items again.
func (r *runner) split(units []*unit) error {
	for _, u := range units {
		var item *emit.Item
		if u.Step.ForeachOf != nil {
			// A dynamic step's items are the unit's, found at run time: the
			// step holds none.
			item = &emit.Item{Value: u.Item, Index: strconv.Itoa(u.Index), Count: strconv.Itoa(r.Count(u.Unit))}
		} else {
			item = emit.ItemAt(u.Step, u.Index)
		}
		j, err := toUnstructured(job.New(r.Flow, u.Step, job.JobName(r.Flow, u.Step, u.Index), emit.PodOptions{Item: item}), u.ns)
		if err != nil {
			return err
		}
		o := object{jobGVR, j}
		var objects []object
		for _, shared := range u.objects {
			if shared.gvr == resourceClaimTemplateGVR {
				objects = append(objects, shared)
			}
		}
		delete(r.byKey, u.key())
		u.fan, u.workload, u.name, u.objects = nil, jobWorkload{}, o.u.GetName(), append(objects, o)
		r.byKey[u.key()] = u
	}
	return nil
}

// perItem says, of each foreach step of f that runs as one Job per item
// rather than one Indexed Job, why (job.NotIndexed); a multi-node step, whose
// Job indexes its nodes, and a run as JobSets go without saying.
func perItem(f *plan.Flow, as string) []string {
	if as == AsJobSet {
		return nil
	}
	var notes []string
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.Foreach == nil || s.Nodes > 1 {
			continue
		}
		if why := job.NotIndexed(s, s.Foreach); why != "" {
			notes = append(notes, fmt.Sprintf("step %s runs each of its %d items as a Job of its own: %s", s.Name, len(s.Foreach), why))
		}
	}
	return notes
}
