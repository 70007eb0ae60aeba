package kube

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

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
	node := func(first, roots, gpusPerRoot, efaPerRoot int) []device {
		var out []device
		for r := first; r < first+roots; r++ {
			root := resourcev1.DeviceAttribute{StringValue: new(fmt.Sprintf("pci0000:%02x", r))}
			attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"resource.kubernetes.io/pcieRoot": root}
			for range gpusPerRoot {
				out = append(out, device{classes: map[string]bool{plan.DeviceClassNVIDIA: true}, attributes: attrs, driver: "gpu.nvidia.com"})
			}
			for range efaPerRoot {
				out = append(out, device{classes: map[string]bool{plan.DeviceClassEFA: true}, attributes: attrs, driver: "dra.net"})
			}
		}
		return out
	}
	d := &devices{classes: map[string]bool{plan.DeviceClassNVIDIA: true, plan.DeviceClassEFA: true}, byNode: map[string][]device{
		"p5":     node(0, 8, 1, 4),
		"shared": node(0, 4, 2, 8),
		"apart":  append(node(0, 8, 1, 0), node(8, 8, 0, 4)...),
		"few":    node(0, 8, 1, 2),
	}}
	n := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	s := &p.Steps[0]
	if why := d.lacks(s, n("p5")); why != "" {
		t.Errorf("p5: %s; want it to take the step", why)
	}
	if why := d.lacks(s, n("shared")); why != "" {
		t.Errorf("shared: %s; want it to take the step", why)
	}
	if why := d.lacks(s, n("apart")); !strings.Contains(why, "room for only 0 of its 8 groups of 1 gpu.nvidia.com and 4 efa.networking.k8s.aws devices that share a resource.kubernetes.io/pcieRoot") {
		t.Errorf("apart: %q", why)
	}
	if why := d.lacks(s, n("few")); !strings.Contains(why, "16 efa.networking.k8s.aws devices, 32 asked") {
		t.Errorf("few: %q", why)
	}
}
