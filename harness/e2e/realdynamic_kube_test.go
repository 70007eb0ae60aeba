package e2e_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/plan"
)

// runKube runs case tc with `run --kube` (the runner reads list's shards and
// pick's size from the store, with the store's credentials in its
// environment), then reads the run's artifacts from its store and the pods
// of process's items, by their completion index: process's items are one
// Indexed Job of as many completions as there are shards, or none over no
// shard.
func (d *dynamicSetup) runKube(t *testing.T, tc dynamicCase) dynamicRun {
	e, store := d.onCluster(t, "dynamic-kube-"+tc.name)
	id := "dynamic-kube-" + tc.name
	cmd := e.command(t, append([]string{"run", "--kube", "--no-build", "--kubeconfig", d.c.Kubeconfig, "--namespace", store.ns,
		"--run-id", id, "--keep"}, paramArgs(tc.params)...)...)
	cmd.Env = append(cmd.Environ(), d.srv.Env()...)
	out, err := cmd.CombinedOutput()
	t.Logf("dynamic run --kube:\n%s", out)
	if err != nil {
		t.Fatalf("run --kube %v: %v", tc.params, err)
	}
	run := dynamicRun{artifacts: map[string][]byte{}, items: map[string][]corev1.Pod{}}
	for key, data := range store.read(t) {
		if rest, ok := strings.CutPrefix(key, "dynamic/"+id+"/"); ok {
			run.artifacts[rest] = data
		}
	}
	ctx := context.Background()
	sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id + "," + plan.LabelStep + "=process"}
	pods, err := d.c.Client.CoreV1().Pods(store.ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		i := p.Annotations[batchv1.JobCompletionIndexAnnotation]
		run.items[i] = append(run.items[i], p)
	}
	jobs, err := d.c.Client.BatchV1().Jobs(store.ns).List(ctx, sel)
	if err != nil {
		t.Fatal(err)
	}
	n := strings.Count(string(d.local[tc.name].artifacts["list/shards.json"]), `"name"`)
	switch {
	case n == 0 && len(jobs.Items) != 0:
		t.Errorf("process over no shard made %d Jobs", len(jobs.Items))
	case n > 0 && (len(jobs.Items) != 1 || *jobs.Items[0].Spec.Completions != int32(n)):
		t.Errorf("process made %d Jobs; want one Indexed Job of %s", len(jobs.Items), strconv.Itoa(n)+" completions")
	}
	return run
}
