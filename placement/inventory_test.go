package placement_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// class is DeviceClass name, which selects the devices of driver as the DRA
// drivers' own classes do.
func class(name, driver string) resourcev1.DeviceClass {
	return resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{
			{CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)}},
		}},
	}
}

// readyNode is a Ready node without taints, with room for any pod's CPU and
// memory.
func readyNode(name string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("192"), corev1.ResourceMemory: resource.MustParse("2Ti"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// TestLacksPCIeRootPairs: a DRA step of 8 GPUs and 32 EFA interfaces asks 8
// groups of a GPU and 4 interfaces under one PCIe root. A node whose 8 roots each
// hold a GPU and 4 interfaces takes it, and so does one whose 4 roots hold 2 GPUs
// and 8 interfaces each; one with as many devices, but its interfaces under
// roots of their own, has room for none of the groups; one with 16 interfaces
// has too few.
func TestLacksPCIeRootPairs(t *testing.T) {
	p, errs := compile.Compile(sdk.NewFlow("f", sdk.Image("example.com/f:v1")).
		Step("train", sdk.Command("train"), sdk.GPU(8), sdk.EFA(32), sdk.DRA()), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if !placement.NeedsDevices(p) {
		t.Fatal("NeedsDevices: false for a step with sdk.DRA()")
	}
	// devices adds to slices, for node, roots PCIe roots from the first on, each
	// with gpusPerRoot GPUs and efaPerRoot EFA interfaces.
	var slices []resourcev1.ResourceSlice
	devices := func(node string, first, roots, gpusPerRoot, efaPerRoot int) {
		gpus := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "gpu.nvidia.com", NodeName: new(node)}}
		efa := resourcev1.ResourceSlice{Spec: resourcev1.ResourceSliceSpec{Driver: "dra.net", NodeName: new(node)}}
		for r := first; r < first+roots; r++ {
			root := resourcev1.DeviceAttribute{StringValue: new(fmt.Sprintf("pci0000:%02x", r))}
			attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"resource.kubernetes.io/pcieRoot": root}
			for range gpusPerRoot {
				gpus.Spec.Devices = append(gpus.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("gpu-%d-%d", first, len(gpus.Spec.Devices)), Attributes: attrs})
			}
			for range efaPerRoot {
				efa.Spec.Devices = append(efa.Spec.Devices, resourcev1.Device{Name: fmt.Sprintf("efa-%d-%d", first, len(efa.Spec.Devices)), Attributes: attrs})
			}
		}
		slices = append(slices, gpus, efa)
	}
	devices("p5", 0, 8, 1, 4)
	devices("shared", 0, 4, 2, 8)
	devices("apart", 0, 8, 1, 0)
	devices("apart", 8, 8, 0, 4)
	devices("few", 0, 8, 1, 2)
	inv := placement.NewInventory([]resourcev1.DeviceClass{class(plan.DeviceClassNVIDIA, "gpu.nvidia.com"), class(plan.DeviceClassEFA, "dra.net")}, slices)
	// on places the step on node name alone.
	on := func(name string) placement.Placement {
		return placement.Plan(p, []corev1.Node{readyNode(name)}, inv, "", "").Steps[0]
	}
	for _, name := range []string{"p5", "shared"} {
		if got := on(name); !got.OK || strings.Join(got.Fit, ",") != name {
			t.Errorf("%s: %+v; want it to take the step", name, got)
		}
	}
	if why := on("apart").Reason; !strings.Contains(why, "room for only 0 of its 8 groups of 1 gpu.nvidia.com and 4 efa.networking.k8s.aws devices that share a resource.kubernetes.io/pcieRoot") {
		t.Errorf("apart: %q", why)
	}
	if why := on("few").Reason; !strings.Contains(why, "efa.networking.k8s.aws: 16, 32 asked") {
		t.Errorf("few: %q", why)
	}
}
