package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// checkType is an instance type no other test's nodes have: the nodes of
// TestCheckEFARollout are the only ones of it.
const checkType = "trn1n.32xlarge"

// addNode creates a Ready node of checkType in the default zone advertising efa
// EFA interfaces, as kwok runs it, and deletes it when t ends.
func addNode(t *testing.T, c *simcluster.Cluster, name string, efa int64) {
	t.Helper()
	addFakeNode(t, c, name, map[string]string{plan.LabelInstanceType: checkType, corev1.LabelTopologyZone: simcluster.Zone},
		[]corev1.Taint{{Key: plan.ResourceNeuron, Effect: corev1.TaintEffectNoSchedule}})
	setEFA(t, c, name, efa)
	untilReady(t, c, name)
}

// addFakeNode creates node name with labels (and its hostname) and taints, for
// kwok to run, and deletes it when t ends. Its status is the caller's to set.
func addFakeNode(t *testing.T, c *simcluster.Cluster, name string, labels map[string]string, taints []corev1.Taint) {
	t.Helper()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name, "type": "kwok"},
			Annotations: map[string]string{simcluster.FakeNodeAnnotation: "fake"}},
		Spec: corev1.NodeSpec{Taints: taints},
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := c.Client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// untilReady waits until kwok has made node name Ready.
func untilReady(t *testing.T, c *simcluster.Cluster, name string) {
	t.Helper()
	w, err := c.Client.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	timeout := time.After(time.Minute)
	for {
		select {
		case ev := <-w.ResultChan():
			if n, ok := ev.Object.(*corev1.Node); ok && ev.Type != watch.Deleted && ready(n) {
				return
			}
		case <-timeout:
			t.Fatalf("node %s did not become Ready", name)
		}
	}
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady {
					return false
				}
			}
			return true
		}
	}
	return false
}

// setEFA sets node name's capacity: a trn1n.32xlarge's, with efa EFA interfaces.
// (A merge patch of the status: kwok updates the node too.)
func setEFA(t *testing.T, c *simcluster.Cluster, name string, efa int64) {
	t.Helper()
	res := fmt.Sprintf(`{"cpu":"128","memory":"512Gi","pods":"110",%q:"16",%q:"%d"}`, plan.ResourceNeuron, plan.ResourceEFA, efa)
	patch := []byte(`{"status":{"capacity":` + res + `,"allocatable":` + res + `}}`)
	if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

// TestCheckEFARollout: two nodes of one type, one advertising EFA and one not (a
// partial rollout of the device plugin). check fails closed and names the counts;
// once both advertise the same count, sdk.EFAAll() resolves to it — not to the
// catalog's — and the run asks for that many.
func TestCheckEFARollout(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	addNode(t, c, "check-a", 8)
	addNode(t, c, "check-b", 0)
	f := sdk.NewFlow("kube-efa", sdk.Image("example.com/flow:v1")).
		Step("train", sdk.Command("train"), sdk.InstanceType(checkType), sdk.Trainium(16), sdk.EFAAll(), sdk.Nodes(2))
	p := compileFlow(t, f)
	if p.Steps[0].EFA != 16 {
		t.Fatalf("the catalog gives %s %d EFA interfaces; the test expects 16", checkType, p.Steps[0].EFA)
	}
	o := options(c, ns, t.TempDir())

	// A partial rollout fails closed.
	wantUnplaceable(t, p, o, "the 2 nodes it targets advertise different numbers of EFA interfaces (0 on check-b; 8 on check-a)")

	setEFA(t, c, "check-b", 8)
	report, err := kube.Check(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK || report.Steps[0].EFA != 8 || strings.Join(report.Steps[0].Fit, ",") != "check-a,check-b" {
		t.Fatalf("check once both nodes advertise 8: %+v; want ok on check-a and check-b, EFA 8", report.Steps[0])
	}

	o.Keep = true
	r := runFlow(t, context.Background(), p, o)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	if !strings.Contains(r.out.String(), "train: sdk.EFAAll() asks the 8 EFA interfaces the cluster's trn1n.32xlarge nodes advertise (the catalog says 16)") {
		t.Errorf("the run does not say EFAAll resolved to the cluster's count")
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + r.res.ID})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods of the run: %d (%v); want 2", len(pods.Items), err)
	}
	for _, pod := range pods.Items {
		got := pod.Spec.Containers[0].Resources.Limits[plan.ResourceEFA]
		if got.Value() != 8 || !strings.HasPrefix(pod.Spec.NodeName, "check-") {
			t.Errorf("pod %s asks %s EFA on node %s; want 8 on check-a or check-b", pod.Name, got.String(), pod.Spec.NodeName)
		}
	}
}

// publishDRA gives node name the ResourceSlices of the Neuron and EFA DRA drivers,
// as the simulated cluster's trn2 nodes have: 16 Neuron devices and efa EFA
// interfaces, all in one devicegroup16 group. A second call replaces the EFA
// interfaces.
func publishDRA(t *testing.T, c *simcluster.Cluster, name string, efa int) {
	t.Helper()
	group := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		simcluster.DeviceGroupAttribute(16): {StringValue: new(name + "-g16-0")},
	}
	for driver, n := range map[string]int{simcluster.DriverNeuron: 16, simcluster.DriverEFA: efa} {
		sl := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + driver},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: driver, NodeName: new(name),
				Pool: resourcev1.ResourcePool{Name: name, Generation: int64(efa), ResourceSliceCount: 1},
			},
		}
		for i := range n {
			sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("dev%d", i), Attributes: group})
		}
		slices := c.Client.ResourceV1().ResourceSlices()
		_ = slices.Delete(context.Background(), sl.Name, metav1.DeleteOptions{})
		if _, err := slices.Create(context.Background(), sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = slices.Delete(context.Background(), sl.Name, metav1.DeleteOptions{}) })
	}
}

// TestCheckDRAEFAAll: a step that claims all 16 Neuron devices and every EFA
// interface (sdk.EFAAll) through DRA, on two nodes whose ResourceSlices publish 8
// EFA interfaces and none (a partial rollout of the EFA DRA driver): check fails
// closed and names the counts; once both publish 8, sdk.EFAAll() resolves to 8,
// not the catalog's 16, and the run's claims are allocated 8.
func TestCheckDRAEFAAll(t *testing.T) {
	c := simcluster.Shared(t)
	ctx := context.Background()
	if err := c.InstallNeuronDRA(ctx, "trn2.48xlarge"); err != nil { // the DeviceClasses
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	const pool = "manifold.dev.test/pool"
	for _, name := range []string{"check-dra-a", "check-dra-b"} {
		addFakeNode(t, c, name, map[string]string{plan.LabelInstanceType: checkType, corev1.LabelTopologyZone: simcluster.Zone, pool: "dra-efaall"}, nil)
		setEFA(t, c, name, 0)
		untilReady(t, c, name)
	}
	publishDRA(t, c, "check-dra-a", 8)
	publishDRA(t, c, "check-dra-b", 0)
	f := sdk.NewFlow("kube-dra-efa", sdk.Image("example.com/flow:v1")).
		Step("train", sdk.Command("train"), sdk.InstanceType(checkType), sdk.NodeSelector(pool, "dra-efaall"),
			sdk.Trainium(16), sdk.EFAAll(), sdk.DRA(), sdk.Nodes(2))
	p := compileFlow(t, f)
	if s := p.Steps[0]; s.EFA != 16 || s.DRA == nil {
		t.Fatalf("the step claims %d EFA interfaces (DRA %v); the test expects the catalog's 16, claimed", s.EFA, s.DRA)
	}
	o := options(c, ns, t.TempDir())

	wantUnplaceable(t, p, o, "the 2 nodes it targets publish different numbers of EFA interfaces of DeviceClass efa.networking.k8s.aws in their ResourceSlices (0 on check-dra-b; 8 on check-dra-a)")

	publishDRA(t, c, "check-dra-b", 8)
	report, err := kube.Check(ctx, p, o)
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK || report.Steps[0].EFA != 8 || strings.Join(report.Steps[0].Fit, ",") != "check-dra-a,check-dra-b" {
		t.Fatalf("check once both nodes publish 8: %+v; want ok on check-dra-a and check-dra-b, EFA 8", report.Steps[0])
	}

	claims := watchClaims(t, c, ns)
	r := runFlow(t, ctx, p, o)
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	if !strings.Contains(r.out.String(), "train: sdk.EFAAll() asks the 8 EFA interfaces the cluster's trn1n.32xlarge nodes advertise (the catalog says 16)") {
		t.Errorf("the run does not say EFAAll resolved to the cluster's count")
	}
	got := claims.all()
	if len(got) != 2 {
		t.Fatalf("%d allocated claims, want one per node of the step (2)", len(got))
	}
	for _, claim := range got {
		efa := 0
		for _, res := range claim.Status.Allocation.Devices.Results {
			if res.Driver == simcluster.DriverEFA {
				efa++
			}
		}
		if efa != 8 {
			t.Errorf("claim %s: allocated %d EFA interfaces; want 8", claim.Name, efa)
		}
	}
}
