package kube_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// poolKey labels and taints the nodes a test makes for itself, so that only its
// own steps land there.
const poolKey = "test.manifold.dev/pool"

// poolNodes makes n fake nodes of pool on c, which kwok runs and only steps
// that select and tolerate pool land on, waits until they are Ready, and
// deletes those left when t ends.
func poolNodes(t *testing.T, c *simcluster.Cluster, pool string, n int) []string {
	t.Helper()
	ctx := context.Background()
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	var names []string
	for i := range n {
		name := pool + "-" + string(rune('0'+i))
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: name,
				Labels: map[string]string{
					corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64",
					simcluster.LabelSimulated: "true", "type": "kwok", poolKey: pool,
				},
				Annotations: map[string]string{simcluster.FakeNodeAnnotation: "fake"},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: poolKey, Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
		}
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node %s: %v", name, err)
		}
		t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		// kwok takes the node up at once, and may change it meanwhile.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			made, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			made.Status.Capacity, made.Status.Allocatable = res, res.DeepCopy()
			_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, made, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatalf("set status of node %s: %v", name, err)
		}
		names = append(names, name)
	}
	for _, name := range names {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err == nil && nodeReady(node) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s is not Ready after 2m: %v", name, err)
			}
		}
	}
	return names
}

// nodeReady reports whether node n is Ready and free of the taints of a node not
// ready yet.
func nodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// pinned is a flow of one step that lands only on pool's nodes and runs there
// for d, retried retry times.
func pinned(name, pool, d string, retry int) *sdk.Flow {
	return sdk.NewFlow(name, sdk.Image("example.com/flow:v1"), sdk.CPU("100m"), sdk.Memory("64Mi")).
		Step("work", sdk.Command("work"), sdk.NodeSelector(poolKey, pool), sdk.Toleration(poolKey, pool, "NoSchedule"),
			sdk.Retry(retry), runFor(d))
}

// runningPod waits for a pod of run id, other than those named in not, to
// run, and returns it.
func runningPod(t *testing.T, ctx context.Context, c *simcluster.Cluster, ns, id string, not ...string) *corev1.Pod {
	t.Helper()
	for ; ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
		if err != nil {
			continue
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && !slices.Contains(not, p.Name) {
				return &p
			}
		}
	}
	t.Errorf("no pod of run %s ran", id)
	return nil
}

// deleteNodeUnder deletes the node under run id's first pod once it runs, and
// returns the node's name. With again, it then waits for the pod of the next
// attempt and lets it end soon: on the simulated cluster every attempt runs as
// long as the pod's run-for label says, which must be longer than the pod
// garbage collector takes to fail the pods of a node that is gone (kwok would
// end the first pod after that time otherwise, node or not).
func deleteNodeUnder(t *testing.T, ctx context.Context, c *simcluster.Cluster, ns, id string, again bool) string {
	t.Helper()
	p := runningPod(t, ctx, c, ns, id)
	if p == nil {
		return ""
	}
	if err := c.Client.CoreV1().Nodes().Delete(ctx, p.Spec.NodeName, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete node %s: %v", p.Spec.NodeName, err)
	}
	t.Logf("deleted node %s under pod %s of run %s", p.Spec.NodeName, p.Name, id)
	if again {
		next := runningPod(t, ctx, c, ns, id, p.Name)
		if next != nil {
			patch := []byte(`{"metadata":{"labels":{"` + simcluster.LabelRunFor + `":"1s"}}}`)
			if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, next.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				t.Errorf("shorten pod %s: %v", next.Name, err)
			}
		}
	}
	return p.Spec.NodeName
}

// TestNodeDeleted deletes the node under a running step: its pod fails (the
// pod garbage collector fails the pods of a node that is gone). A step with
// Retry runs again on another node and the run succeeds, leaving nothing; a
// step without fails the run with a message that names the pod and the node.
func TestNodeDeleted(t *testing.T) {
	t.Parallel() // waits on kwok's and the pod garbage collector's clocks
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	retried := poolNodes(t, c, ns+"-r", 2)
	lost := poolNodes(t, c, ns+"-l", 1)

	runs := map[string]*run{}
	gone := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for id, f := range map[string]*sdk.Flow{
		"retried": pinned("retried", ns+"-r", "3m", 1),
		"lost":    pinned("lost", ns+"-l", "3m", 0),
	} {
		o := options(c, ns, t.TempDir())
		o.RunID, o.NoCheck = id, true
		p := compileFlow(t, f)
		wg.Go(func() {
			r := runFlow(t, ctx, p, o)
			mu.Lock()
			runs[id] = r
			mu.Unlock()
		})
		wg.Go(func() {
			node := deleteNodeUnder(t, ctx, c, ns, id, id == "retried")
			mu.Lock()
			gone[id] = node
			mu.Unlock()
		})
	}
	wg.Wait()

	// With Retry the step runs again, on the pool's other node.
	r := runs["retried"]
	if r.err != nil {
		t.Fatalf("the run with Retry failed: %v", r.err)
	}
	task := r.tasks["work"]
	if task.State != record.Succeeded || task.Attempts != 2 {
		t.Errorf("work: %s after %d attempts; want succeeded after 2", task.State, task.Attempts)
	}
	other := retried[0]
	if gone["retried"] == other {
		other = retried[1]
	}
	if task.Node != other {
		t.Errorf("work ran again on node %q; want %s, the pool's node left", task.Node, other)
	}
	if !strings.Contains(r.out.String(), "node "+gone["retried"]) {
		t.Errorf("the run does not name node %s where its first attempt failed", gone["retried"])
	}
	if left := labelled(t, c, ns, "retried"); len(left) > 0 {
		t.Errorf("left on the cluster: %v", left)
	}

	// Without, it fails, naming the node.
	r = runs["lost"]
	if r.err == nil || r.res == nil || r.res.State != record.Failed {
		t.Fatalf("the run without Retry: %v; want it failed", r.err)
	}
	task = r.tasks["work"]
	want := "on node " + lost[0] + ": node deleted"
	if task.State != record.Failed || !strings.Contains(task.Error, want) || !strings.Contains(r.err.Error(), want) {
		t.Errorf("work: %s: %q (run: %v); want failed with %q", task.State, task.Error, r.err, want)
	}
	if task.Reason != cluster.ReasonNodeDeleted {
		t.Errorf("work's reason: %q; want %s", task.Reason, cluster.ReasonNodeDeleted)
	}
}
