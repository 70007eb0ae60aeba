package placement_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// node is a Ready trn1.32xlarge node in zone z1 with the Neuron taint and efa
// EFA interfaces.
func node(name string, efa int64, change func(*corev1.Node)) corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("128"), corev1.ResourceMemory: resource.MustParse("512Gi"),
		plan.ResourceNeuron: resource.MustParse("16"), plan.ResourceEFA: *resource.NewQuantity(efa, resource.DecimalSI),
	}
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{plan.LabelInstanceType: "trn1.32xlarge", corev1.LabelHostname: name, corev1.LabelTopologyZone: "z1"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: plan.ResourceNeuron, Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Allocatable: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	if change != nil {
		change(&n)
	}
	return n
}

// TestPlaceStep checks one 2-node Trainium step with EFA against node sets, each
// with the reason a scheduler would give, or a placement.
func TestPlaceStep(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image("example.com/f:v1")).
		Step("train", sdk.Command("train"), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Nodes(2))
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
	otherType := func(n *corev1.Node) { n.Labels[plan.LabelInstanceType] = "p5.48xlarge" }
	zone := func(z string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			delete(n.Labels, corev1.LabelTopologyZone)
			if z != "" {
				n.Labels[corev1.LabelTopologyZone] = z
			}
		}
	}
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoSchedule})
	}
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		fit   string
		want  string // in the reason; "" when it can be placed
	}{
		{"two fit", []corev1.Node{node("a", 8, nil), node("b", 8, nil), node("c", 8, otherType)}, "a,b", ""},
		{"one fits", []corev1.Node{node("a", 8, nil), node("b", 8, cordoned), node("c", 8, otherType)}, "a",
			"it runs on 2 nodes at once, and 1/3 nodes can take its pod: 1 are cordoned, 1 do not match its node selector node.kubernetes.io/instance-type=trn1.32xlarge"},
		{"none fit", []corev1.Node{node("a", 8, notReady), node("b", 8, tainted)}, "",
			"it would stay Pending: 0/2 nodes can take its pod: 1 are not Ready, 1 have a taint it does not tolerate (dedicated=infra:NoSchedule)"},
		{"too little EFA", []corev1.Node{node("a", 4, nil), node("b", 4, nil)}, "",
			"0/2 nodes can take its pod: 2 have too little vpc.amazonaws.com/efa (4 allocatable, 8 asked)"},
		{"mixed EFA", []corev1.Node{node("a", 8, nil), node("b", 4, nil), node("c", 8, nil)}, "",
			"the 3 nodes it targets advertise different numbers of EFA interfaces (4 on b; 8 on a, c)"},
		{"two fit, in two zones", []corev1.Node{node("a", 8, nil), node("b", 8, zone("z2"))}, "a,b",
			"its 2 pods go one per kubernetes.io/hostname and all in one topology.kubernetes.io/zone (EFA does not leave a zone; sdk.AnyZone() lets them span zones), and no topology.kubernetes.io/zone has 2 such nodes that can take its pod (1 in z1; 1 in z2)"},
		{"two of three in one zone", []corev1.Node{node("a", 8, zone("z2")), node("b", 8, nil), node("c", 8, zone("z2"))}, "a,b,c", ""},
		{"one without a zone", []corev1.Node{node("a", 8, nil), node("b", 8, zone(""))}, "a,b",
			"(1 in z1; 1 without the label kubernetes.io/hostname or topology.kubernetes.io/zone)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := placement.Plan(p, tc.nodes, nil, "https://cluster", "ctx")
			if len(r.Steps) != 1 {
				t.Fatalf("report of %d steps; want 1", len(r.Steps))
			}
			got := r.Steps[0]
			if strings.Join(got.Fit, ",") != tc.fit || got.OK != (tc.want == "") || !strings.Contains(got.Reason, tc.want) {
				t.Errorf("placement %+v; want fit %q and reason %q", got, tc.fit, tc.want)
			}
			if r.OK != got.OK || r.Cluster != "https://cluster" || r.Context != "ctx" || r.NodeCount != len(tc.nodes) {
				t.Errorf("report %+v; want cluster https://cluster, context ctx, %d nodes and ok %v", r, len(tc.nodes), got.OK)
			}
		})
	}
}

// TestResolve: once the trn1n.32xlarge nodes a 2-node sdk.EFAAll() step targets
// all advertise 8 EFA interfaces, Plan reports 8 and Resolve asks for 8 instead
// of the catalog's 16, with a note; a step without sdk.EFAAll() and the flow
// Resolve was given are not changed.
func TestResolve(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image("example.com/f:v1")).
		Step("train", sdk.Command("train"), sdk.InstanceType("trn1n.32xlarge"), sdk.Trainium(16), sdk.EFAAll(), sdk.Nodes(2)).
		Step("report", sdk.Command("report"), sdk.After("train"), sdk.Toleration(plan.ResourceNeuron, "", "NoSchedule"))
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if p.Steps[0].EFA != 16 {
		t.Fatalf("the catalog gives trn1n.32xlarge %d EFA interfaces; the test expects 16", p.Steps[0].EFA)
	}
	trn1n := func(n *corev1.Node) { n.Labels[plan.LabelInstanceType] = "trn1n.32xlarge" }
	r := placement.Plan(p, []corev1.Node{node("a", 8, trn1n), node("b", 8, trn1n)}, nil, "", "")
	if !r.OK || r.Steps[0].EFA != 8 {
		t.Fatalf("report %+v; want every step placed, train with EFA 8", r)
	}
	got, notes := placement.Resolve(p, r)
	want := "train: sdk.EFAAll() asks the 8 EFA interfaces the cluster's trn1n.32xlarge nodes advertise (the catalog says 16)"
	if len(notes) != 1 || notes[0] != want {
		t.Errorf("notes %q; want %q", notes, want)
	}
	efa := func(qs []plan.Quantity) string {
		for _, q := range qs {
			if q.Name == plan.ResourceEFA {
				return q.Value
			}
		}
		return ""
	}
	if s := got.Steps[0]; s.EFA != 8 || efa(s.Requests) != "8" || efa(s.Limits) != "8" {
		t.Errorf("resolved step asks EFA %d, requests %q, limits %q; want 8", s.EFA, efa(s.Requests), efa(s.Limits))
	}
	if s := got.Steps[1]; s.EFA != 0 || efa(s.Requests) != "" || efa(s.Limits) != "" {
		t.Errorf("resolved step report asks EFA %d, requests %q, limits %q; want none", s.EFA, efa(s.Requests), efa(s.Limits))
	}
	if s := p.Steps[0]; s.EFA != 16 || efa(s.Requests) != "16" || efa(s.Limits) != "16" {
		t.Errorf("Resolve changed the flow it was given: EFA %d, requests %q, limits %q", s.EFA, efa(s.Requests), efa(s.Limits))
	}
}

// TestRefuse: a refusal marks the step and the report unplaceable, after the
// reason the step had already.
func TestRefuse(t *testing.T) {
	r := &placement.Report{OK: true, Steps: []placement.Placement{
		{Step: "a", OK: true}, {Step: "b", Reason: "it would stay Pending"}, {Step: "c", OK: true},
	}}
	r.Refuse(1, "no queue")
	r.Refuse(2, "no template")
	if r.OK {
		t.Error("the report is still OK")
	}
	var got []string
	for _, p := range r.Unplaceable() {
		got = append(got, p.Step+": "+p.Reason)
	}
	want := "b: it would stay Pending; and no queue|c: no template"
	if strings.Join(got, "|") != want {
		t.Errorf("unplaceable %q; want %q", strings.Join(got, "|"), want)
	}
}
