package compile_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func TestTolerations(t *testing.T) {
	cfgTol := compile.Config{Tolerations: []compile.ConfigToleration{{Key: "dedicated", Value: "ml", Effect: "NoSchedule"}}}
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		cfg  compile.Config
		want []plan.Toleration
	}{
		{
			name: "config, flow, step, then neuron",
			flow: sdk.NewFlow("f", sdk.Image(img), sdk.Toleration("team", "a", "NoSchedule")).
				Step("s", sdk.Command("true"), sdk.Trainium(1), sdk.Toleration("spot", "", "NoExecute")),
			cfg: cfgTol,
			want: []plan.Toleration{
				{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"},
				{Key: "team", Operator: "Equal", Value: "a", Effect: "NoSchedule"},
				{Key: "spot", Operator: "Exists", Effect: "NoExecute"},
				neuronTol,
			},
		},
		{
			name: "neuron after the user's even when given first",
			flow: sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(1)).
				Step("s", sdk.Command("true"), sdk.Toleration("spot", "", "")),
			want: []plan.Toleration{{Key: "spot", Operator: "Exists"}, neuronTol},
		},
		{
			name: "config toleration without value or operator is Exists",
			flow: one(),
			cfg:  compile.Config{Tolerations: []compile.ConfigToleration{{Key: "dedicated"}}},
			want: []plan.Toleration{{Key: "dedicated", Operator: "Exists"}},
		},
		{
			name: "config toleration with an explicit operator",
			flow: one(),
			cfg:  compile.Config{Tolerations: []compile.ConfigToleration{{Key: "dedicated", Operator: "Exists", Effect: "NoExecute"}}},
			want: []plan.Toleration{{Key: "dedicated", Operator: "Exists", Effect: "NoExecute"}},
		},
		{
			name: "the user's own neuron toleration is not repeated",
			flow: one(sdk.Toleration(neuronKey, "", "NoSchedule"), sdk.Toleration("spot", "", ""), sdk.Trainium(1)),
			want: []plan.Toleration{neuronTol, {Key: "spot", Operator: "Exists"}},
		},
		{
			name: "identical tolerations across layers appear once",
			flow: sdk.NewFlow("f", sdk.Image(img), sdk.Toleration("dedicated", "ml", "NoSchedule")).
				Step("s", sdk.Command("true"), sdk.Toleration("dedicated", "ml", "NoSchedule"), sdk.Toleration("dedicated", "ml", "NoSchedule")),
			cfg:  cfgTol,
			want: []plan.Toleration{{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"}},
		},
		{
			name: "tolerations that differ only in effect are kept",
			flow: one(sdk.Toleration("k", "", "NoSchedule"), sdk.Toleration("k", "", "NoExecute")),
			want: []plan.Toleration{{Key: "k", Operator: "Exists", Effect: "NoSchedule"}, {Key: "k", Operator: "Exists", Effect: "NoExecute"}},
		},
		{
			name: "tolerate everything",
			flow: one(sdk.Toleration("", "", "")),
			want: []plan.Toleration{{Operator: "Exists"}},
		},
		{
			name: "efa adds no toleration",
			flow: one(sdk.EFA(4)),
			want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustStep(t, tc.flow, compile.Options{Config: tc.cfg}, "s")
			if diff := cmp.Diff(tc.want, got.Tolerations, planOpts); diff != "" {
				t.Errorf("tolerations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTolerationErrors(t *testing.T) {
	cfgTols := func(ts ...compile.ConfigToleration) compile.Options {
		return compile.Options{Config: compile.Config{Tolerations: ts}}
	}
	tol0 := sAt("tolerations").Index(0)
	cfg0 := field.NewPath("config", "tolerations").Index(0)
	two := func(opts ...sdk.Option) *sdk.Flow {
		f := sdk.NewFlow("f", append([]sdk.FlowOption{sdk.Image(img)}, toFlow(opts)...)...)
		return f.Step("a", sdk.Command("true")).Step("b", sdk.Command("true"))
	}
	runErrorCases(t, []errorCase{
		{
			name: "step effect",
			flow: one(sdk.Toleration("k", "v", "Sometimes")),
			want: field.ErrorList{field.NotSupported[string](tol0.Child("effect"), "Sometimes", nil)},
		},
		{
			name: "step key",
			flow: one(sdk.Toleration("bad key!", "", "")),
			want: field.ErrorList{field.Invalid(tol0.Child("key"), nil, "")},
		},
		{
			name: "step value",
			flow: one(sdk.Toleration("k", "bad value!", "")),
			want: field.ErrorList{field.Invalid(tol0.Child("value"), nil, "")},
		},
		{
			name: "step second toleration",
			flow: one(sdk.Toleration("k", "", ""), sdk.Toleration("k", "", "Never")),
			want: field.ErrorList{field.NotSupported[string](sAt("tolerations").Index(1).Child("effect"), "Never", nil)},
		},
		{
			name: "value without key",
			flow: one(sdk.Toleration("", "v", "")),
			want: field.ErrorList{field.Required(tol0.Child("key"), "")},
		},
		{
			name: "config operator",
			flow: one(),
			opts: cfgTols(compile.ConfigToleration{Key: "k", Operator: "In"}),
			want: field.ErrorList{field.NotSupported[string](cfg0.Child("operator"), "In", nil)},
		},
		{
			name: "config effect",
			flow: one(),
			opts: cfgTols(compile.ConfigToleration{Key: "k", Effect: "Sometimes"}),
			want: field.ErrorList{field.NotSupported[string](cfg0.Child("effect"), "Sometimes", nil)},
		},
		{
			name: "config second toleration",
			flow: one(),
			opts: cfgTols(compile.ConfigToleration{Key: "k"}, compile.ConfigToleration{Key: "k", Effect: "Sometimes"}),
			want: field.ErrorList{field.NotSupported[string](field.NewPath("config", "tolerations").Index(1).Child("effect"), "Sometimes", nil)},
		},
		{
			name: "config value with Exists",
			flow: one(),
			opts: cfgTols(compile.ConfigToleration{Key: "k", Operator: "Exists", Value: "v"}),
			want: field.ErrorList{field.Invalid(cfg0.Child("value"), nil, "")},
		},
		{
			name: "config error reported once for every step",
			flow: two(),
			opts: cfgTols(compile.ConfigToleration{Key: "k", Effect: "Sometimes"}),
			want: field.ErrorList{field.NotSupported[string](cfg0.Child("effect"), "Sometimes", nil)},
		},
		{
			name: "flow error reported once for every step",
			flow: two(sdk.Toleration("k", "v", "Sometimes")),
			want: field.ErrorList{field.NotSupported[string](field.NewPath("flow", "tolerations").Index(0).Child("effect"), "Sometimes", nil)},
		},
	})
}

func TestNodeSelector(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.NodeSelector("zone", "flow"), sdk.NodeSelector("pool", "gpu")).
		Step("s", sdk.Command("true"), sdk.NodeSelector("zone", "step"), sdk.InstanceType("trn1.32xlarge"))
	cfg := compile.Config{NodeSelector: map[string]string{"zone": "config", "karpenter.sh/capacity-type": "on-demand"}}
	got := mustStep(t, f, compile.Options{Config: cfg}, "s").NodeSelector
	want := []plan.KeyValue{
		{Key: "karpenter.sh/capacity-type", Value: "on-demand"},
		{Key: instanceKey, Value: "trn1.32xlarge"},
		{Key: "pool", Value: "gpu"},
		{Key: "zone", Value: "step"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}
}

func TestNodeSelectorErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name: "bad key",
			flow: one(sdk.NodeSelector("bad key!", "v")),
			want: field.ErrorList{field.Invalid(sAt("nodeSelector").Key("bad key!"), nil, "")},
		},
		{
			name: "bad value",
			flow: one(sdk.NodeSelector("zone", "bad value!")),
			want: field.ErrorList{field.Invalid(sAt("nodeSelector").Key("zone"), nil, "")},
		},
		{
			name: "bad config value",
			flow: one(),
			opts: compile.Options{Config: compile.Config{NodeSelector: map[string]string{"zone": "bad value!"}}},
			want: field.ErrorList{field.Invalid(field.NewPath("config", "node_selector").Key("zone"), nil, "")},
		},
	})
}

// toFlow turns options valid at both levels into flow options.
func toFlow(opts []sdk.Option) []sdk.FlowOption {
	out := make([]sdk.FlowOption, len(opts))
	for i, o := range opts {
		out[i] = o
	}
	return out
}

// TestStepWinsOverRelatedDefaults: a step's own option replaces a lower layer's
// option that sets the same thing under another name.
func TestStepWinsOverRelatedDefaults(t *testing.T) {
	// A step's Inferentia replaces the flow's Trainium default, and the other way.
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(4)).Step("s", sdk.Command("true"), sdk.Inferentia(1))
	if s := mustStep(t, f, compile.Options{}, "s"); s.Neuron != 1 {
		t.Errorf("flow Trainium(4), step Inferentia(1): Neuron = %d, want 1", s.Neuron)
	}
	f = sdk.NewFlow("f", sdk.Image(img), sdk.Inferentia(2)).Step("s", sdk.Command("true"), sdk.Trainium(3))
	if s := mustStep(t, f, compile.Options{}, "s"); s.Neuron != 3 {
		t.Errorf("flow Inferentia(2), step Trainium(3): Neuron = %d, want 3", s.Neuron)
	}

	// A step's InstanceType replaces manifold.toml's selector for the same label.
	cfg := compile.Options{Config: compile.Config{NodeSelector: map[string]string{instanceKey: "p5.48xlarge"}}}
	s := mustStep(t, one(sdk.InstanceType("trn1.32xlarge")), cfg, "s")
	if diff := cmp.Diff([]plan.KeyValue{{Key: instanceKey, Value: "trn1.32xlarge"}}, s.NodeSelector); diff != "" {
		t.Errorf("node selector (-want +got):\n%s", diff)
	}

	// A step's selector that disagrees with the flow's InstanceType is still an error,
	// at the step's selector.
	f = sdk.NewFlow("f", sdk.Image(img), sdk.InstanceType("trn1.32xlarge")).
		Step("s", sdk.Command("true"), sdk.NodeSelector(instanceKey, "p5.48xlarge"))
	wantErrs(t, f, compile.Options{}, field.ErrorList{field.Invalid(sAt("nodeSelector").Key(instanceKey), nil, "")})

	// And so is a flow default that gives both names, at the flow's option.
	f = sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(1), sdk.Inferentia(1)).Step("s", sdk.Command("true"))
	wantErrs(t, f, compile.Options{}, field.ErrorList{field.Forbidden(field.NewPath("flow", "inferentia"), "")})
}
