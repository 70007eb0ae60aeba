package kube_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestFanOutIsOneJob runs a foreach step of three items, whose item 1 fails
// every time it runs (kwok fails the pod of completion index 1), with one
// retry. The step is one Indexed Job of three completions, beside the
// ConfigMap of its items, and nothing else; each pod reads its index from its
// completion index and its item from the ConfigMap's file. Item 1 alone runs
// twice and fails, named in the record with its two attempts and why; items 0
// and 2 run once and succeed; the step after them does not start.
func TestFanOutIsOneJob(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	f := sdk.NewFlow("fan", sdk.Image("example.com/flow:v1")).
		Step("each", sdk.Command("each"), sdk.Foreach("a", "b", "c"), sdk.Retry(1),
			sdk.Label(simcluster.LabelFailIndexOne, "true")).
		Step("join", sdk.After("each"), sdk.Command("join"))
	p := compileFlow(t, f)
	r := runFlow(t, context.Background(), p, options(c, ns, t.TempDir()))
	if r.err == nil || r.res == nil || r.res.State != record.Failed {
		t.Fatalf("run: %v, result %+v; want it failed", r.err, r.res)
	}
	for label, want := range map[string]struct {
		state    record.State
		attempts int
	}{"each[0]": {record.Succeeded, 1}, "each[1]": {record.Failed, 2}, "each[2]": {record.Succeeded, 1}} {
		task := r.tasks[label]
		if task.State != want.state || task.Attempts != want.attempts {
			t.Errorf("%s: %s after %d attempts (%s); want %s after %d", label, task.State, task.Attempts, task.Error, want.state, want.attempts)
		}
	}
	if e := r.tasks["each[1]"].Error; !strings.Contains(e, "(exit 1)") || !strings.Contains(e, "index 1 failed 2 times, past its backoffLimitPerIndex of 1") {
		t.Errorf("each[1]'s error is %q; want the container's exit and the index's failures", e)
	}
	if task, ok := r.tasks["join"]; ok && task.State != record.Skipped && task.State != record.Pending {
		t.Errorf("join: %s; want it never started", task.State)
	}

	// The failed run leaves its objects: one Job and one ConfigMap for each.
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + r.res.ID + "," + plan.LabelStep + "=each"}
	jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	cms, err := c.Client.CoreV1().ConfigMaps(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 1 || len(cms.Items) != 1 {
		t.Fatalf("step each made %d Jobs and %d ConfigMaps; want one of each", len(jobs.Items), len(cms.Items))
	}
	j, cm := jobs.Items[0], cms.Items[0]
	if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion || *j.Spec.Completions != 3 ||
		j.Spec.BackoffLimitPerIndex == nil || *j.Spec.BackoffLimitPerIndex != 1 {
		t.Errorf("Job %s: completion mode %v, completions %d, backoffLimitPerIndex %v; want Indexed, 3, 1", j.Name, j.Spec.CompletionMode, *j.Spec.Completions, j.Spec.BackoffLimitPerIndex)
	}
	if want := map[string]string{"0": "a", "1": "b", "2": "c"}; !maps.Equal(cm.Data, want) {
		t.Errorf("ConfigMap %s holds %v; want %v", cm.Name, cm.Data, want)
	}
	if got := ptr.Deref(j.Status.FailedIndexes, ""); got != "1" || j.Status.CompletedIndexes != "0,2" {
		t.Errorf("the Job says indexes %q failed and %q completed; want 1 and 0,2", got, j.Status.CompletedIndexes)
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	perIndex := map[string]int{}
	for _, p := range pods.Items {
		perIndex[p.Annotations[batchv1.JobCompletionIndexAnnotation]]++
	}
	if want := map[string]int{"0": 1, "1": 2, "2": 1}; !maps.Equal(perIndex, want) {
		t.Errorf("pods by index: %v; want %v", perIndex, want)
	}
	tmpl := j.Spec.Template.Spec
	env := tmpl.Containers[0].Env
	if i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == plan.EnvItem }); i >= 0 {
		t.Errorf("the pods share %s=%q; want none", plan.EnvItem, env[i].Value)
	}
	if i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == plan.EnvIndex }); i < 0 || env[i].ValueFrom == nil ||
		env[i].ValueFrom.FieldRef == nil || !strings.Contains(env[i].ValueFrom.FieldRef.FieldPath, batchv1.JobCompletionIndexAnnotation) {
		t.Errorf("%s is not read from the completion index: %+v", plan.EnvIndex, env)
	}
	if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
		return e.Name == plan.EnvItemFile && e.Value == emit.ItemsPath+"/$("+plan.EnvIndex+")"
	}) {
		t.Errorf("no %s at %s/$(%s): %+v", plan.EnvItemFile, emit.ItemsPath, plan.EnvIndex, env)
	}
	if !slices.ContainsFunc(tmpl.Volumes, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == cm.Name
	}) {
		t.Errorf("the pods do not mount ConfigMap %s: %+v", cm.Name, tmpl.Volumes)
	}
}
