package placement_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDRAEFAAll: a step that claims every EFA interface of its p5.48xlarge
// nodes through DRA (8 GPUs, sdk.EFAAll(), sdk.DRA(): 8 groups of a GPU and 4 of
// the catalog's 32 interfaces under one PCIe root) asks as many as the nodes'
// ResourceSlices publish, when every node it targets publishes the same count;
// a mixed rollout, no EFA devices at all, or a count the groups cannot share
// fails closed, as for device-plugin EFA.
func TestDRAEFAAll(t *testing.T) {
	p, errs := compile.Compile(sdk.NewFlow("f", sdk.Image("example.com/f:v1")).
		Step("train", sdk.Command("train"), sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll(), sdk.DRA(), sdk.Nodes(2)), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if s := p.Steps[0]; s.EFA != 32 || len(s.DRA.Constraints) != 8 {
		t.Fatalf("the step asks %d EFA interfaces in %d groups; the test expects the catalog's 32 in 8", s.EFA, len(s.DRA.Constraints))
	}
	classes := []resourcev1.DeviceClass{class(plan.DeviceClassNVIDIA, "gpu.nvidia.com"), class(plan.DeviceClassEFA, "dra.net")}
	// p5 is a p5.48xlarge node whose 8 PCIe roots each hold a GPU, with its
	// ResourceSlices: efa EFA interfaces, dealt to the roots in turn.
	p5 := func(name string, efa int) (corev1.Node, []resourcev1.ResourceSlice) {
		n := readyNode(name)
		n.Labels[plan.LabelInstanceType] = "p5.48xlarge"
		n.Labels[corev1.LabelTopologyZone] = "z1"
		gpus := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new(name)}}
		interfaces := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "dra.net", NodeName: new(name)}}
		root := func(r int) map[resourcev1.QualifiedName]resourcev1.DeviceAttribute {
			return map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"resource.kubernetes.io/pcieRoot": {StringValue: new(fmt.Sprintf("pci0000:%02x", r))},
			}
		}
		for r := range 8 {
			gpus.Spec.Devices = append(gpus.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d", r), Attributes: root(r)})
		}
		for i := range efa {
			interfaces.Spec.Devices = append(interfaces.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("efa-%d", i), Attributes: root(i % 8)})
		}
		return n, []resourcev1.ResourceSlice{gpus, interfaces}
	}
	plan := func(efa ...int) *placement.Report {
		var nodes []corev1.Node
		var slices []resourcev1.ResourceSlice
		for i, e := range efa {
			n, sl := p5(fmt.Sprintf("p5-%d", i), e)
			nodes, slices = append(nodes, n), append(slices, sl...)
		}
		return placement.Plan(p, nodes, placement.NewInventory(classes, slices), "", "")
	}

	for _, tc := range []struct {
		name string
		efa  []int
		want string // in the reason
	}{
		{"mixed rollout", []int{16, 32}, "the 2 nodes it targets publish different numbers of EFA interfaces of DeviceClass efa.networking.k8s.aws in their ResourceSlices (16 on p5-0; 32 on p5-1): a partial or mixed rollout of the EFA DRA driver"},
		{"partial rollout", []int{0, 16}, "(0 on p5-0; 16 on p5-1)"},
		{"4 interfaces for 8 groups", []int{4, 4}, "sdk.EFAAll(): the nodes it targets publish 4 EFA interfaces, which the 8 groups of its claim cannot share evenly; ask a count with sdk.EFA(n)"},
		{"no EFA devices", []int{0, 0}, "sdk.EFAAll(): the 2 nodes it targets publish no EFA interfaces of DeviceClass efa.networking.k8s.aws in ResourceSlices; is the EFA DRA driver running?"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.efa...).Steps[0]; got.OK || !strings.Contains(got.Reason, tc.want) {
				t.Errorf("placement %+v; want it refused: %s", got, tc.want)
			}
		})
	}

	// 16 interfaces on each node: the claim's 8 groups take 2 each, and both
	// nodes fit, where the catalog's 32 would fit neither.
	r := plan(16, 16)
	if got := r.Steps[0]; !got.OK || got.EFA != 16 || strings.Join(got.Fit, ",") != "p5-0,p5-1" {
		t.Fatalf("placement %+v; want both nodes to fit, EFA 16", got)
	}
	resolved, notes := placement.Resolve(p, r)
	if len(notes) != 1 || !strings.Contains(notes[0], "sdk.EFAAll() asks the 16 EFA interfaces the cluster's p5.48xlarge nodes advertise (the catalog says 32)") {
		t.Errorf("notes %q", notes)
	}
	s := resolved.Steps[0]
	efa := 0
	for _, req := range s.DRA.Requests {
		if strings.HasPrefix(req.Name, "efa-") {
			efa += req.Count
			if req.Count != 2 {
				t.Errorf("request %s asks %d; want 2", req.Name, req.Count)
			}
		}
	}
	if s.EFA != 16 || efa != 16 {
		t.Errorf("resolved step: EFA %d, claimed %d; want 16", s.EFA, efa)
	}
	if p.Steps[0].DRA.Requests[1].Count != 4 {
		t.Errorf("Resolve changed the claim of the flow it was given: %+v", p.Steps[0].DRA.Requests)
	}

}

// TestZeroNeedsNoAccelerator: a step that takes the flow's Trainium and EFA
// defaults away (Trainium(0), EFA(0)) asks no Neuron device and tolerates no
// Neuron taint, so a plain node takes it and a Neuron node does not, while the
// flow's other step goes the other way.
func TestZeroNeedsNoAccelerator(t *testing.T) {
	p, errs := compile.Compile(sdk.NewFlow("f", sdk.Image("example.com/f:v1"), sdk.Trainium(16), sdk.EFA(8)).
		Step("prep", sdk.Command("prep"), sdk.Trainium(0), sdk.EFA(0)).
		Step("train", sdk.Command("train"), sdk.After("prep"), sdk.InstanceType("trn1.32xlarge")), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	r := placement.Plan(p, []corev1.Node{readyNode("plain"), node("trn1", 8, nil)}, nil, "", "")
	got := map[string]string{}
	for _, s := range r.Steps {
		got[s.Step] = strings.Join(s.Fit, ",")
	}
	if got["prep"] != "plain" || got["train"] != "trn1" {
		t.Errorf("prep fits %q, train fits %q; want plain and trn1", got["prep"], got["train"])
	}
}
