package job

import (
	"strconv"
	"strings"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// MaxItemsBytes is the most that the items of one fan-out run as an Indexed
// Job may take, keys included: the API server keeps at most 1 MiB of a
// ConfigMap's data, and the rest is room for its metadata.
const MaxItemsBytes = 1000 << 10

// FanOut returns the two objects that run every item of step s, a foreach
// step, at once: the ConfigMap of its items (key "<index>", value the item's
// text) and one Indexed Job of len(items) completions, all run at once, each
// index retried on its own (backoffLimitPerIndex: the step's Retry) while the
// others go on. Each pod reads its index from its completion index and its item
// from the ConfigMap, mounted at emit.ItemsPath (MANIFOLD_ITEM_FILE); it has no
// MANIFOLD_ITEM, since the pods share one spec. count sets MANIFOLD_COUNT, as
// for a fan-out over a value found at run time. The step's Timeout bounds each
// pod, not the Job. Both are named as the step's Job (JobName with no index).
func FanOut(f *plan.Flow, s *plan.Step, items []string, count bool) (*corev1.ConfigMap, *batchv1.Job) {
	name := JobName(f, s, -1)
	item := &emit.Item{Items: name}
	if count {
		item.Count = strconv.Itoa(len(items))
	}
	j := New(f, s, name, emit.PodOptions{Item: item})
	n := int32(len(items))
	j.Spec.CompletionMode = new(batchv1.IndexedCompletion)
	j.Spec.Completions, j.Spec.Parallelism = &n, new(n)
	j.Spec.BackoffLimit = nil
	j.Spec.BackoffLimitPerIndex = new(int32(s.Retry))
	j.Spec.ActiveDeadlineSeconds = nil
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: j.Spec.Template.Labels},
	}
	for i, v := range items {
		key := strconv.Itoa(i)
		if utf8.ValidString(v) {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data[key] = v
			continue
		}
		if cm.BinaryData == nil {
			cm.BinaryData = map[string][]byte{}
		}
		cm.BinaryData[key] = []byte(v)
	}
	return cm, j
}

// NotIndexed says why step s's fan-out over items runs as one Job per item
// rather than one Indexed Job (FanOut), "" when it need not: a multi-node
// step's Job indexes its nodes, a step whose command or variables name
// MANIFOLD_ITEM needs each pod to have its own, and items past MaxItemsBytes
// do not fit a ConfigMap.
func NotIndexed(s *plan.Step, items []string) string {
	if s.Nodes > 1 {
		return "each item is a multi-node Job of its own, whose index is the node's rank"
	}
	if namesItem(s) {
		return "its command or variables name " + plan.EnvItem + ", which the pods of one Job, sharing one spec, cannot each be given; read the item from the file $" + plan.EnvItemFile + " instead to run the items as one Indexed Job"
	}
	size := 0
	for i, v := range items {
		size += len(v) + len(strconv.Itoa(i))
	}
	if size > MaxItemsBytes {
		return "its items take " + strconv.Itoa(size) + " bytes, more than the " + strconv.Itoa(MaxItemsBytes) + " one ConfigMap holds"
	}
	return ""
}

// namesItem reports whether s's command or variables name MANIFOLD_ITEM (and
// not only MANIFOLD_ITEM_FILE).
func namesItem(s *plan.Step) bool {
	names := func(v string) bool {
		return strings.Contains(strings.ReplaceAll(v, plan.EnvItemFile, ""), plan.EnvItem)
	}
	for _, a := range s.Command {
		if names(a) {
			return true
		}
	}
	for _, e := range s.Env {
		if names(e.Value) {
			return true
		}
	}
	return false
}
