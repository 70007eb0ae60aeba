package compile_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func TestNodes(t *testing.T) {
	trn := func(s *plan.Step) {
		s.Neuron, s.InstanceType = 16, "trn1.32xlarge"
		s.Requests, s.Limits = q(plan.ResourceNeuron, "16"), q(plan.ResourceNeuron, "16")
		s.NodeSelector = []plan.KeyValue{{Key: plan.LabelInstanceType, Value: "trn1.32xlarge"}}
		s.Tolerations = []plan.Toleration{{Key: plan.ResourceNeuron, Operator: "Exists", Effect: "NoSchedule"}}
	}
	runAcceleratorCases(t, []acceleratorCase{
		{name: "one node is an ordinary step", opts: []sdk.StepOption{sdk.Nodes(1)}, want: cmdStep()},
		{name: "several nodes rendezvous on torchrun's port", opts: []sdk.StepOption{sdk.Nodes(4)},
			want: with(func(s *plan.Step) { s.Nodes, s.Port, s.Apart = 4, plan.DefaultPort, hostname })},
		{name: "port chooses the rendezvous port", opts: []sdk.StepOption{sdk.Nodes(2), sdk.Port(1234)},
			want: with(func(s *plan.Step) { s.Nodes, s.Port, s.Apart = 2, 1234, hostname })},
		{name: "accelerator counts stay per node", opts: []sdk.StepOption{sdk.Nodes(2), sdk.Trainium(16), sdk.InstanceType("trn1.32xlarge")},
			want: with(func(s *plan.Step) { trn(s); s.Nodes, s.Port, s.Apart = 2, plan.DefaultPort, hostname })},
	})

	// A flow default reaches every step; a step's own value wins.
	p := mustCompile(t, sdk.NewFlow("f", sdk.Image(img), sdk.Nodes(2)).
		Step("a", sdk.Command("true")).
		Step("b", sdk.Command("true"), sdk.Nodes(1)), compile.Options{})
	if got := []int{p.Steps[0].Nodes, p.Steps[1].Nodes}; got[0] != 2 || got[1] != 1 {
		t.Errorf("nodes of a, b = %v, want [2 1]", got)
	}
	if p.Steps[1].Port != 0 {
		t.Errorf("a one-node step got port %d, want none", p.Steps[1].Port)
	}
}

func TestNodesErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{name: "zero nodes", flow: one(sdk.Nodes(0)), want: field.ErrorList{field.Invalid(sAt("nodes"), nil, "")}, details: []string{"sdk.Nodes(1)"}},
		{name: "negative nodes", flow: one(sdk.Nodes(-2)), want: field.ErrorList{field.Invalid(sAt("nodes"), nil, "")}},
		{name: "more nodes than an Indexed Job runs", flow: one(sdk.Nodes(100001)), want: field.ErrorList{field.Invalid(sAt("nodes"), nil, "")}},
		{name: "port taken by the Neuron runtime", flow: one(sdk.Nodes(2), sdk.Trainium(1), sdk.Port(plan.NeuronRootCommPort)),
			want: field.ErrorList{field.Invalid(sAt("port"), nil, "")}, details: []string{"choose another sdk.Port"}},
		{name: "rendezvous variable set by hand", flow: one(sdk.Nodes(2), sdk.Env("MASTER_PORT", "1")),
			want: field.ErrorList{field.Forbidden(sAt("env").Key("MASTER_PORT"), "")}, details: []string{"sdk.Port"}},
		{name: "rendezvous rank set by hand", flow: one(sdk.Nodes(2), sdk.Env("MANIFOLD_NODE_RANK", "1")),
			want: field.ErrorList{field.Forbidden(sAt("env").Key("MANIFOLD_NODE_RANK"), "")}},
	})

	// The same names are the user's own on a one-node step.
	mustCompile(t, one(sdk.Env("MASTER_PORT", "1"), sdk.Port(plan.NeuronRootCommPort), sdk.Trainium(1)), compile.Options{})
}
