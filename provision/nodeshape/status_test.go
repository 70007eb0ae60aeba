package nodeshape

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
)

// TestStatusApply: the body ApplyStatus sends is, byte for byte, the JSON of
// client-go's apply configuration of the same status (what Nodes' ApplyStatus
// would send), for a shape with extended resources and for one without.
func TestStatusApply(t *testing.T) {
	for _, typ := range []string{"trn1.32xlarge", "p5.48xlarge", "inf2.xlarge"} {
		s, err := ForType(typ)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Resources) == 0 {
			t.Fatalf("%s: a shape without extended resources", typ)
		}
		status := corev1ac.NodeStatus().WithCapacity(s.Resources.DeepCopy()).WithAllocatable(s.Resources.DeepCopy())
		checkStatusApply(t, typ, "node-1", s, corev1ac.Node("node-1").WithStatus(status))
	}
	checkStatusApply(t, "no extended resources", "node-2", Shape{InstanceType: "m7i.8xlarge"},
		corev1ac.Node("node-2").WithStatus(corev1ac.NodeStatus()))
}

func checkStatusApply(t *testing.T, what, name string, s Shape, want *corev1ac.NodeApplyConfiguration) {
	t.Helper()
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := statusApply(name, s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diff := cmp.Diff(string(wantJSON), string(got)); diff != "" {
		t.Errorf("%s: the status apply (-client-go's +ours):\n%s", what, diff)
	}
}
