package kube_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// allocations watches the ResourceClaims of namespace ns and keeps the
// allocation of each, by claim, as the scheduler writes it: the claims of a
// run's pods are deleted with the pods when the run ends.
type allocations struct {
	mu     sync.Mutex
	claims map[string]*resourcev1.ResourceClaim
}

func watchClaims(t *testing.T, c *simcluster.Cluster, ns string) *allocations {
	t.Helper()
	w, err := c.Client.ResourceV1().ResourceClaims(ns).Watch(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch ResourceClaims: %v", err)
	}
	t.Cleanup(w.Stop)
	a := &allocations{claims: map[string]*resourcev1.ResourceClaim{}}
	go func() {
		for ev := range w.ResultChan() {
			claim, ok := ev.Object.(*resourcev1.ResourceClaim)
			if !ok || ev.Type == watch.Deleted || claim.Status.Allocation == nil {
				continue
			}
			a.mu.Lock()
			a.claims[claim.Name] = claim
			a.mu.Unlock()
		}
	}()
	return a
}

func (a *allocations) all() []*resourcev1.ResourceClaim {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*resourcev1.ResourceClaim
	for _, c := range a.claims {
		out = append(out, c)
	}
	return out
}

// sliceDevices returns every published device's attributes, by driver, pool and
// device name, and its node.
func sliceDevices(t *testing.T, c *simcluster.Cluster) map[string]resourcev1.Device {
	t.Helper()
	list, err := c.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]resourcev1.Device{}
	for _, sl := range list.Items {
		for _, d := range sl.Spec.Devices {
			out[sl.Spec.Driver+"/"+sl.Spec.Pool.Name+"/"+d.Name] = d
		}
	}
	return out
}

// checkColocated checks that claim was allocated neuron Neuron devices and efa
// EFA interfaces that all carry one value of the devicegroup<size> attribute in
// the ResourceSlices, on one node.
func checkColocated(t *testing.T, claim *resourcev1.ResourceClaim, devices map[string]resourcev1.Device, size, neuron, efa int) {
	t.Helper()
	got := map[string]int{}
	groups := map[string]bool{}
	pools := map[string]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		got[r.Driver]++
		pools[r.Pool] = true
		d, ok := devices[r.Driver+"/"+r.Pool+"/"+r.Device]
		if !ok {
			t.Errorf("claim %s: allocated %s/%s/%s, which no ResourceSlice publishes", claim.Name, r.Driver, r.Pool, r.Device)
			continue
		}
		v := d.Attributes[simcluster.DeviceGroupAttribute(size)].StringValue
		if v == nil {
			t.Errorf("claim %s: device %s has no %s", claim.Name, r.Device, simcluster.DeviceGroupAttribute(size))
			continue
		}
		groups[*v] = true
	}
	if got[simcluster.DriverNeuron] != neuron || got[simcluster.DriverEFA] != efa {
		t.Errorf("claim %s: allocated %v devices by driver, want %d Neuron and %d EFA", claim.Name, got, neuron, efa)
	}
	if len(groups) != 1 || len(pools) != 1 {
		t.Errorf("claim %s: devices from groups %v of pools %v, want one group of one node", claim.Name, groups, pools)
	}
}

// TestDRAExample runs the neuron-dra example as a user would, `run --kube`, on
// trn2.48xlarge nodes whose Neuron and EFA devices the DRA drivers publish: each
// of its two pods lands on a node of its own with a claim allocated 16 Neuron
// devices and 16 EFA interfaces of one devicegroup16.
func TestDRAExample(t *testing.T) {
	c := simcluster.Shared(t)
	if err := c.InstallNeuronDRA(context.Background(), "trn2.48xlarge"); err != nil {
		t.Fatal(err)
	}
	bin := exampletest.Build(t)["neuron-dra"]
	for _, as := range []string{"job", "jobset"} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			claims := watchClaims(t, c, ns)
			cmd := exec.Command(bin, "run", "--kube", "--no-build", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as, "--run-id", "dra")
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			t.Logf("neuron-dra run --kube --as %s:\n%s", as, out)
			if err != nil {
				t.Fatalf("run --kube: %v", err)
			}
			if !strings.Contains(string(out), "run dra succeeded") {
				t.Errorf("the output does not end the run as succeeded")
			}
			devices := sliceDevices(t, c)
			got := claims.all()
			if len(got) != 2 {
				t.Fatalf("%d allocated claims, want one per node of the step (2)", len(got))
			}
			for _, claim := range got {
				checkColocated(t, claim, devices, 16, 16, 16)
			}
			if left := labelled(t, c, ns, "dra"); len(left) > 0 {
				t.Errorf("left on the cluster: %v", left)
			}
		})
	}
}

// neuronTaint tolerates the taint the simulated trn2 nodes carry, as EKS node
// groups put it; a DRA step gets no toleration for its claimed devices.
var neuronTaint = sdk.Toleration(simcluster.TaintNeuron, "", "NoSchedule")

// TestDRAColocated: pods that each claim 4 Neuron devices and 4 EFA interfaces
// get four of one devicegroup4 group, whichever node and group they land on; and
// a claim that no group can satisfy (8 EFA beside 4 Neuron devices, where a group
// of 4 has 4) is predicted by check and stays Pending, its claim never allocated,
// until the run gives up on it.
func TestDRAColocated(t *testing.T) {
	c := simcluster.Shared(t)
	ctx := context.Background()
	if err := c.InstallNeuronDRA(ctx, "trn2.48xlarge"); err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	claims := watchClaims(t, c, ns)
	p := compileFlow(t, sdk.NewFlow("dra-four", sdk.Image("example.com/flow:v1")).
		Step("infer", sdk.Command("infer"), sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(4), sdk.EFA(4), sdk.DRA(),
			neuronTaint, sdk.Foreach("a", "b", "c", "d", "e")))
	r := runFlow(t, ctx, p, options(c, ns, t.TempDir()))
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	devices := sliceDevices(t, c)
	got := claims.all()
	if len(got) != 5 {
		t.Fatalf("%d allocated claims, want one per item (5)", len(got))
	}
	for _, claim := range got {
		checkColocated(t, claim, devices, 4, 4, 4)
	}

	ns = c.Namespace(t)
	bad := compileFlow(t, sdk.NewFlow("dra-short", sdk.Image("example.com/flow:v1")).
		Step("infer", sdk.Command("infer"), sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(4), sdk.EFA(8), sdk.DRA(), neuronTaint))
	report, err := kube.Check(ctx, bad, kube.Options{Kubeconfig: c.Kubeconfig, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if report.OK || len(report.Unplaceable()) != 1 || !strings.Contains(report.Unplaceable()[0].Reason, "resource.aws.com/devicegroup4_id") {
		t.Errorf("check: %+v; want infer unplaceable for want of a devicegroup4_id group", report.Steps)
	}
	short := watchClaims(t, c, ns)
	o := options(c, ns, t.TempDir())
	o.NoCheck, o.PendingGrace, o.PendingTimeout = true, time.Second, 15*time.Second
	r = runFlow(t, ctx, bad, o)
	if r.err == nil {
		t.Fatal("the run of an unsatisfiable claim succeeded")
	}
	if !strings.Contains(r.out.String(), "cannot allocate all claims") {
		t.Errorf("the run does not report the scheduler's reason, that the claim cannot be allocated")
	}
	if got := short.all(); len(got) > 0 {
		t.Errorf("%d claims of the unsatisfiable step were allocated", len(got))
	}
}

// TestCheckInstalledClaim: a step claiming from an installed ResourceClaimTemplate
// (sdk.Claim) that its namespace lacks is named unplaceable by check; once the
// platform team has installed it, the step can be placed.
func TestCheckInstalledClaim(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	p := compileFlow(t, sdk.NewFlow("claims", sdk.Image("example.com/flow:v1")).
		Step("serve", sdk.Command("serve"), sdk.CPU("1"), sdk.Claim("shared-fpga")))
	o := options(c, ns, t.TempDir())
	wantUnplaceable(t, p, o, "it claims from the ResourceClaimTemplate shared-fpga (sdk.Claim), which namespace "+ns+" does not have")

	tpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "shared-fpga"},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "fpga", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "fpga.example.com"}}},
		}}},
	}
	if _, err := c.Client.ResourceV1().ResourceClaimTemplates(ns).Create(context.Background(), tpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	report, err := kube.Check(context.Background(), p, o)
	if err != nil || !report.OK {
		t.Fatalf("check once the template is installed: %+v, %v; want it placed", report, err)
	}
}
