package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// placeType is an instance type no other test's nodes have: the nodes of
// TestPlacement are the only ones of it.
const placeType = "p4d.24xlarge"

// rack is a node label of the test's own, for sdk.Spread.
const rack = "sim.manifold.dev/rack"

// addP4d creates a Ready p4d.24xlarge node in zone and rack, with its 8 GPUs and
// 4 EFA interfaces, and deletes it when t ends.
func addP4d(t *testing.T, c *simcluster.Cluster, name, zone, inRack string) {
	t.Helper()
	addFakeNode(t, c, name, map[string]string{plan.LabelInstanceType: placeType, corev1.LabelTopologyZone: zone, rack: inRack},
		[]corev1.Taint{{Key: plan.ResourceNVIDIA, Effect: corev1.TaintEffectNoSchedule}})
	res := fmt.Sprintf(`{"cpu":"96","memory":"1152Gi","pods":"110",%q:"8",%q:"4"}`, plan.ResourceNVIDIA, plan.ResourceEFA)
	patch := []byte(`{"status":{"capacity":` + res + `,"allocatable":` + res + `}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	untilReady(t, c, name)
}

// podNodes returns the nodes of the pods of run id's step, sorted.
func podNodes(t *testing.T, c *simcluster.Cluster, ns, id, step string) []*corev1.Node {
	t.Helper()
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id + "," + plan.LabelStep + "=" + step})
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Node
	for _, p := range pods.Items {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node of pod %s: %v", p.Name, err)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// wantUnplaceable checks that check names the first step of p unplaceable for
// a reason that says why.
func wantUnplaceable(t *testing.T, p *plan.Flow, o kube.Options, why string) {
	t.Helper()
	report, err := kube.Check(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	if report.OK || !strings.Contains(report.Steps[0].Reason, why) {
		t.Errorf("check: %+v; want step %s unplaceable: %s", report.Steps[0], p.Steps[0].Name, why)
	}
}

func names(nodes []*corev1.Node) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	return out
}

// TestPlacement: four p4d nodes, two in each of two zones. The pods run side by
// side (simcluster.LabelRunFor), as a multi-node step's do. A 3-node EFA step
// keeps its pods in one zone, so check says no zone can hold it and the real
// scheduler agrees; 2 nodes land in one zone, one pod per node; AnyZone spreads
// 3 over both zones. Spread over a label two nodes share keeps the second pod
// off the first's, as check predicts.
func TestPlacement(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	addP4d(t, c, "p4d-b-0", "sim-1b", "r1")
	addP4d(t, c, "p4d-b-1", "sim-1b", "r1")
	addP4d(t, c, "p4d-c-0", "sim-1c", "r2")
	addP4d(t, c, "p4d-c-1", "sim-1c", "r3")
	// Pods that must wait run long enough to outlast the pending timeout.
	runFor, runLong := sdk.Label(simcluster.LabelRunFor, "3s"), sdk.Label(simcluster.LabelRunFor, "60s")
	train := func(opts ...sdk.StepOption) *plan.Flow {
		return compileFlow(t, sdk.NewFlow("zones", sdk.Image("example.com/flow:v1")).
			Step("train", append([]sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.InstanceType(placeType),
				sdk.GPU(8), sdk.EFA(4), sdk.EFAWiring()}, opts...)...))
	}
	pending := func(o *kube.Options) {
		o.NoCheck = true
		o.PendingGrace, o.PendingTimeout = time.Second, 4*time.Second
	}

	t.Run("no zone holds 3", func(t *testing.T) {
		p := train(sdk.Nodes(3), runLong)
		o := options(c, ns, t.TempDir())
		wantUnplaceable(t, p, o, "no topology.kubernetes.io/zone has 3 such nodes that can take its pod (2 in sim-1b; 2 in sim-1c)")
		pending(&o)
		r := runFlow(t, context.Background(), p, o)
		const scheduler = "didn't match pod affinity rules"
		if r.err == nil || !strings.Contains(r.err.Error(), scheduler) {
			t.Errorf("run: %v; want the scheduler to keep a pod Pending: %s", r.err, scheduler)
		}
	})

	t.Run("2 in one zone", func(t *testing.T) {
		o := options(c, ns, t.TempDir())
		o.Keep = true
		r := runFlow(t, context.Background(), train(sdk.Nodes(2), runFor), o)
		if r.err != nil {
			t.Fatal(r.err)
		}
		got := podNodes(t, c, ns, r.res.ID, "train")
		if len(got) != 2 || got[0].Name == got[1].Name || got[0].Labels[corev1.LabelTopologyZone] != got[1].Labels[corev1.LabelTopologyZone] {
			t.Errorf("pods on %v; want two nodes of one zone", names(got))
		}
	})

	t.Run("AnyZone spans zones", func(t *testing.T) {
		p := train(sdk.Nodes(3), sdk.AnyZone(), runFor)
		o := options(c, ns, t.TempDir())
		report, err := kube.Check(context.Background(), p, o)
		if err != nil || !report.OK {
			t.Fatalf("check: %+v, %v; want it placed", report, err)
		}
		o.Keep = true
		r := runFlow(t, context.Background(), p, o)
		if r.err != nil {
			t.Fatal(r.err)
		}
		got := podNodes(t, c, ns, r.res.ID, "train")
		zones := map[string]bool{}
		for _, n := range got {
			zones[n.Labels[corev1.LabelTopologyZone]] = true
		}
		if len(got) != 3 || len(slices.Compact(names(got))) != 3 || len(zones) != 2 {
			t.Errorf("pods on %v; want three nodes over both zones", names(got))
		}
	})

	t.Run("Spread", func(t *testing.T) {
		// Two small pods that one node could hold, in the zone whose two nodes
		// share a rack.
		p := compileFlow(t, sdk.NewFlow("apart", sdk.Image("example.com/flow:v1")).
			Step("shard", sdk.Command("true"), sdk.CPU("1"), sdk.Nodes(2), sdk.Spread(rack), runLong,
				sdk.NodeSelector(corev1.LabelTopologyZone, "sim-1b"), sdk.Toleration(plan.ResourceNVIDIA, "", "NoSchedule")))
		o := options(c, ns, t.TempDir())
		wantUnplaceable(t, p, o, "its 2 pods go one per "+rack+", and the nodes that can take its pod have 1 distinct values")
		pending(&o)
		r := runFlow(t, context.Background(), p, o)
		const scheduler = "didn't match pod anti-affinity rules"
		if r.err == nil || !strings.Contains(r.err.Error(), scheduler) {
			t.Errorf("run: %v; want the scheduler to keep the second pod Pending: %s", r.err, scheduler)
		}
	})
}
