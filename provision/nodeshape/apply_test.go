package nodeshape_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/provision/nodeshape"
)

func TestMain(m *testing.M) { os.Exit(simcluster.Main(m)) }

// nodes are the node operations of the tests: nodeshape's, and those a
// kubelet and a node's owner use.
type nodes interface {
	nodeshape.Nodes
	Create(ctx context.Context, node *corev1.Node, opts metav1.CreateOptions) (*corev1.Node, error)
	UpdateStatus(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// Both clients of nodes: kubeclient's, which `kind up` uses, and client-go's
// typed one, which the simulated cluster's harness uses.
var (
	_ nodes = (*gentype.ClientWithList[*corev1.Node, *corev1.NodeList])(nil)
	_ nodes = corev1client.NodeInterface(nil)
)

// kubeNodes returns kubeclient's client of the simulated cluster's nodes.
func kubeNodes(t *testing.T) nodes {
	t.Helper()
	c, err := kubeclient.NewForConfig(simcluster.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return c.CoreV1().Nodes()
}

// kubeletStatus is the status a kubelet reports for a host of its own: cpu,
// memory and pods.
var kubeletStatus = corev1.ResourceList{
	corev1.ResourceCPU:    resource.MustParse("8"),
	corev1.ResourceMemory: resource.MustParse("32Gi"),
	corev1.ResourcePods:   resource.MustParse("110"),
}

// plainNode creates a node with no labels of ours, waits until kwok (the
// simulated cluster's kubelet) has made it Ready, then gives it the status a
// kubelet reports for its host; it deletes the node when t ends.
func plainNode(t *testing.T, c nodes, name string, taints ...corev1.Taint) {
	t.Helper()
	ctx := context.Background()
	_, err := c.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "team": "ml"},
			Annotations: map[string]string{simcluster.FakeNodeAnnotation: "fake"}},
		Spec: corev1.NodeSpec{Taints: taints},
		// A kubelet registers its node with its status, as here: kwok's
		// first status then keeps it, even when kwok renders it from an
		// older copy of the node after the status update below.
		Status: corev1.NodeStatus{Capacity: kubeletStatus.DeepCopy(), Allocatable: kubeletStatus.DeepCopy()},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	untilNode(t, c, name, "Ready", func(n *corev1.Node) bool {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})
	updateStatus(t, c, name, func(st *corev1.NodeStatus) {
		st.Capacity, st.Allocatable = kubeletStatus.DeepCopy(), kubeletStatus.DeepCopy()
	})
}

// updateStatus changes node name's status as its kubelet would: read, change,
// update (again if another writer got there first).
func updateStatus(t *testing.T, c nodes, name string, change func(*corev1.NodeStatus)) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	var updated *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&n.Status)
		updated, err = c.UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return updated
}

// untilNode watches node name until cond holds, for at most a minute, and
// returns the node as it then was.
func untilNode(t *testing.T, c nodes, name, what string, cond func(*corev1.Node) bool) *corev1.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return c.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return c.Watch(ctx, o)
		},
	}
	last, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(e watch.Event) (bool, error) {
		n, ok := e.Object.(*corev1.Node)
		return ok && cond(n), nil
	})
	if err != nil {
		t.Fatalf("node %s: not %s within a minute: %v", name, what, err)
	}
	return last.Object.(*corev1.Node)
}

func count(list corev1.ResourceList, name corev1.ResourceName) string {
	q, ok := list[name]
	if !ok {
		return "absent"
	}
	return q.String()
}

// TestApply shapes a plain node as a trn1.32xlarge on the simulated cluster's
// API server and reads back what it advertises: the labels, the Neuron taint
// beside the node's own, and 16 Neuron devices and 8 EFA interfaces as capacity
// and allocatable, while the kubelet's cpu, memory and pods stay as they were
// and stay the kubelet's. It does so through kubeclient's nodes and through
// client-go's typed ones, which must send the same requests.
func TestApply(t *testing.T) {
	t.Run("kubeclient", func(t *testing.T) { testApply(t, kubeNodes(t), "shape-apply") })
	t.Run("client-go", func(t *testing.T) {
		testApply(t, simcluster.Shared(t).Client.CoreV1().Nodes(), "shape-apply-client-go")
	})
}

func testApply(t *testing.T, c nodes, name string) {
	ctx := context.Background()
	own := corev1.Taint{Key: "example.com/dedicated", Value: "ml", Effect: corev1.TaintEffectNoExecute}
	plainNode(t, c, name, own)
	s, err := nodeshape.ForType("trn1.32xlarge")
	if err != nil {
		t.Fatal(err)
	}
	if err := nodeshape.Apply(ctx, c, name, s); err != nil {
		t.Fatal(err)
	}
	n, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"node.kubernetes.io/instance-type": "trn1.32xlarge", "manifold.dev/simulated": "true", "team": "ml"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, n.Labels[k], v, n.Labels)
		}
	}
	var taints []string
	for _, tn := range n.Spec.Taints {
		if tn.Key != corev1.TaintNodeNotReady && tn.Key != corev1.TaintNodeUnreachable { // the lifecycle controller's
			taints = append(taints, tn.ToString())
		}
	}
	if got, want := strings.Join(taints, " "), "example.com/dedicated=ml:NoExecute aws.amazon.com/neuron:NoSchedule"; got != want {
		t.Errorf("taints %q, want %q", got, want)
	}
	for _, tc := range []struct {
		res  corev1.ResourceName
		want string
	}{
		{"aws.amazon.com/neuron", "16"}, {"vpc.amazonaws.com/efa", "8"}, {"nvidia.com/gpu", "absent"},
		{corev1.ResourceCPU, "8"}, {corev1.ResourceMemory, "32Gi"}, {corev1.ResourcePods, "110"},
	} {
		if got := count(n.Status.Allocatable, tc.res); got != tc.want {
			t.Errorf("allocatable %s = %s, want %s", tc.res, got, tc.want)
		}
		if got := count(n.Status.Capacity, tc.res); got != tc.want {
			t.Errorf("capacity %s = %s, want %s", tc.res, got, tc.want)
		}
	}
	// The status apply owns the extended resources and nothing of the kubelet's.
	var owned string
	for _, mf := range n.ManagedFields {
		if mf.Manager == nodeshape.FieldManager && mf.Subresource == "status" {
			if mf.Operation != metav1.ManagedFieldsOperationApply {
				t.Errorf("%s wrote the status by %s, want Apply", mf.Manager, mf.Operation)
			}
			owned = string(mf.FieldsV1.Raw)
		}
	}
	for _, want := range []string{`"f:aws.amazon.com/neuron"`, `"f:vpc.amazonaws.com/efa"`} {
		if !strings.Contains(owned, want) {
			t.Errorf("%s does not own %s of the status: %s", nodeshape.FieldManager, want, owned)
		}
	}
	for _, notWant := range []string{`"f:cpu"`, `"f:memory"`, `"f:pods"`, `"f:conditions"`} {
		if strings.Contains(owned, notWant) {
			t.Errorf("%s owns %s of the status: %s", nodeshape.FieldManager, notWant, owned)
		}
	}

	// Applying again adds no second taint and keeps the counts.
	if err := nodeshape.Apply(ctx, c, name, s); err != nil {
		t.Fatal(err)
	}
	if n, err = c.Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	neuronTaints := 0
	for _, tn := range n.Spec.Taints {
		if tn.Key == nodeshape.TaintNeuron {
			neuronTaints++
		}
	}
	if neuronTaints != 1 || !s.Advertised(n) {
		t.Errorf("after a second Apply: taints %v, allocatable %v", n.Spec.Taints, n.Status.Allocatable)
	}
}

// TestApplyStatusReshape: shaping a trn1.32xlarge node as an inf2.xlarge sets one
// Neuron device and drops the EFA interfaces the first shape applied.
func TestApplyStatusReshape(t *testing.T) {
	c := kubeNodes(t)
	ctx := context.Background()
	const name = "shape-reshape"
	plainNode(t, c, name)
	for _, typ := range []string{"trn1.32xlarge", "inf2.xlarge"} {
		s, err := nodeshape.ForType(typ)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nodeshape.ApplyStatus(ctx, c, name, s); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := count(n.Status.Allocatable, "aws.amazon.com/neuron"); got != "1" {
		t.Errorf("allocatable Neuron %s, want 1", got)
	}
	if got := count(n.Status.Allocatable, "vpc.amazonaws.com/efa"); got != "absent" {
		t.Errorf("allocatable EFA %s, want none", got)
	}
	if got := count(n.Status.Allocatable, corev1.ResourceCPU); got != "8" {
		t.Errorf("allocatable cpu %s, want the kubelet's 8", got)
	}
}

func TestApplyStatusMissingNode(t *testing.T) {
	c := kubeNodes(t)
	s, err := nodeshape.ForType("trn1.32xlarge")
	if err != nil {
		t.Fatal(err)
	}
	_, err = nodeshape.ApplyStatus(context.Background(), c, "no-such-node", s)
	if err == nil || !strings.Contains(err.Error(), "node no-such-node: the node does not exist") {
		t.Errorf("error %v, want one saying the node does not exist", err)
	}
}

// TestKeep shapes a node, has Keep watch it, then resets the node's status as a
// kubelet does that finds its node recreated (extended resources zeroed): Keep applies the shape
// again, and says so. When its context ends, Keep returns.
func TestKeep(t *testing.T) {
	c := kubeNodes(t)
	const name = "shape-keep"
	plainNode(t, c, name)
	s, err := nodeshape.ForType("trn1.32xlarge")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := nodeshape.Apply(ctx, c, name, s); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var reapplied []error
	keepCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- nodeshape.Keep(keepCtx, c, map[string]nodeshape.Shape{name: s}, func(node string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if node != name {
				t.Errorf("Keep applied the shape of node %s, which it was not given", node)
			}
			reapplied = append(reapplied, err)
		})
	}()
	defer func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Keep: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Keep did not return 30s after its context ended")
		}
	}()

	// The kubelet's reset: both extended resources to zero, as its own update.
	reset := updateStatus(t, c, name, func(st *corev1.NodeStatus) {
		for _, res := range []corev1.ResourceName{"aws.amazon.com/neuron", "vpc.amazonaws.com/efa"} {
			st.Capacity[res], st.Allocatable[res] = resource.MustParse("0"), resource.MustParse("0")
		}
	})
	if got := count(reset.Status.Allocatable, "aws.amazon.com/neuron"); got != "0" {
		t.Fatalf("the reset left allocatable Neuron %s", got)
	}

	// Watch the node until it advertises its shape again.
	n := untilNode(t, c, name, "advertising its shape again", s.Advertised)
	if got := count(n.Status.Allocatable, "aws.amazon.com/neuron"); got != "16" {
		t.Errorf("allocatable Neuron %s after Keep, want 16", got)
	}
	if got := count(n.Status.Allocatable, "vpc.amazonaws.com/efa"); got != "8" {
		t.Errorf("allocatable EFA %s after Keep, want 8", got)
	}
	// Keep reports an apply once the API server has answered it, which the
	// watch above may see first.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(reapplied)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the shape came back, but Keep never reported applying it")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, err := range reapplied {
		if err != nil {
			t.Errorf("Keep's apply failed: %v", err)
		}
	}
}
