package compile_test

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// set is compile options that override step "s" with opts, as --set does.
func set(opts ...sdk.StepOption) compile.Options {
	return compile.Options{Overrides: map[string][]sdk.StepOption{"s": opts}}
}

// defaults is flow "f" with the flow options defaults and one Command step "s"
// with opts.
func defaults(flowOpts []sdk.FlowOption, opts ...sdk.StepOption) *sdk.Flow {
	return sdk.NewFlow("f", append([]sdk.FlowOption{sdk.Image(img)}, flowOpts...)...).
		Step("s", append([]sdk.StepOption{sdk.Command("true")}, opts...)...)
}

// TestZeroTakesAwayADefault: a 0 over a count that a lower layer asks (the flow's
// default, or the step's code under --set) means the step asks none: no request,
// no limit, no toleration, and nothing that needs the devices.
func TestZeroTakesAwayADefault(t *testing.T) {
	trn1 := []plan.KeyValue{{Key: instanceKey, Value: "trn1.32xlarge"}}
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		opts compile.Options
		want plan.Step
	}{
		{
			name: "step trainium zero under a flow trainium",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Trainium(0)),
			want: cmdStep(),
		},
		{
			name: "step inferentia zero under a flow trainium",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Inferentia(0)),
			want: cmdStep(),
		},
		{
			name: "step trainium zero under a flow inferentia",
			flow: defaults([]sdk.FlowOption{sdk.Inferentia(2)}, sdk.Trainium(0)),
			want: cmdStep(),
		},
		{
			name: "step neuron resource zero under a flow trainium",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Resource(neuronKey, 0)),
			want: cmdStep(),
		},
		{
			name: "step trainium zero under a flow neuron resource",
			flow: defaults([]sdk.FlowOption{sdk.Resource(neuronKey, 16)}, sdk.Trainium(0)),
			want: cmdStep(),
		},
		{
			name: "step efa zero under a flow efa",
			flow: defaults([]sdk.FlowOption{sdk.EFA(8)}, sdk.EFA(0)),
			want: cmdStep(),
		},
		{
			name: "step efa resource zero under a flow efa",
			flow: defaults([]sdk.FlowOption{sdk.EFA(8)}, sdk.Resource(efaKey, 0)),
			want: cmdStep(),
		},
		{
			// EFAAll needs an instance type only where it is in force.
			name: "step efa zero under a flow EFAAll without an instance type",
			flow: defaults([]sdk.FlowOption{sdk.EFAAll()}, sdk.EFA(0)),
			want: cmdStep(),
		},
		{
			name: "step efa zero under a flow EFAAll, the instance type stays",
			flow: defaults([]sdk.FlowOption{sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFAAll()}, sdk.EFA(0)),
			want: with(func(s *plan.Step) {
				s.InstanceType, s.NodeSelector = "trn1.32xlarge", trn1
				s.Neuron = 16
				s.Requests, s.Limits = q(neuronKey, "16"), q(neuronKey, "16")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			// The instance type's capacity is checked against what the step asks,
			// and it asks none: inf2.xlarge has one Neuron device, not 16.
			name: "a smaller instance type than the flow's default count",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Trainium(0), sdk.InstanceType("inf2.xlarge")),
			want: with(func(s *plan.Step) {
				s.InstanceType = "inf2.xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "inf2.xlarge"}}
			}),
		},
		{
			name: "set trainium zero over the step's code",
			flow: one(sdk.Trainium(16), sdk.EFA(8)),
			opts: set(sdk.Trainium(0), sdk.EFA(0)),
			want: cmdStep(),
		},
		{
			name: "set over a step's zero over the flow",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Trainium(0)),
			opts: set(sdk.Trainium(2)),
			want: with(func(s *plan.Step) {
				s.Neuron = 2
				s.Requests, s.Limits = q(neuronKey, "2"), q(neuronKey, "2")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			// The wiring is the flow's, for the steps that ask EFA.
			name: "flow wiring, step efa zero",
			flow: defaults([]sdk.FlowOption{sdk.EFA(8), sdk.EFAWiring()}, sdk.EFA(0)),
			want: cmdStep(),
		},
		{
			// The step's wiring was for the EFA that --set takes away.
			name: "step wiring, set efa zero",
			flow: one(sdk.EFA(8), sdk.EFAWiring(), sdk.EFAArch("arm64")),
			opts: set(sdk.EFA(0)),
			want: cmdStep(),
		},
		{
			name: "flow DRA, step zeroes every device",
			flow: defaults([]sdk.FlowOption{sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(16), sdk.EFA(16), sdk.DRA()},
				sdk.Trainium(0), sdk.EFA(0)),
			want: with(func(s *plan.Step) {
				s.InstanceType = "trn2.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "trn2.48xlarge"}}
			}),
		},
		{
			name: "step DRA, set zeroes its devices",
			flow: one(sdk.Trainium(4), sdk.DRA()),
			opts: set(sdk.Trainium(0)),
			want: cmdStep(),
		},
		{
			name: "flow DRA, step zeroes the EFA only",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(4), sdk.EFA(4), sdk.DRA()}, sdk.EFA(0)),
			want: with(func(s *plan.Step) {
				s.Neuron = 4
				s.DRA = &plan.DRA{Requests: []plan.DeviceRequest{{Name: "neuron", Class: "neuron.aws.com", Count: 4}}}
			}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := mustStep(t, tc.flow, tc.opts, "s")
			if diff := cmp.Diff(tc.want, got, planOpts); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSetReplacesNeuronCount: a --set of Trainium or Inferentia is the step's
// Neuron count, whichever name the code used.
func TestSetReplacesNeuronCount(t *testing.T) {
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		opts compile.Options
		want int
	}{
		{"inferentia over trainium", one(sdk.Trainium(4)), set(sdk.Inferentia(2)), 2},
		{"trainium over inferentia", one(sdk.Inferentia(1)), set(sdk.Trainium(8)), 8},
		{"trainium over a neuron resource", one(sdk.Resource(neuronKey, 4)), set(sdk.Trainium(8)), 8},
		{"inferentia over a flow trainium", defaults([]sdk.FlowOption{sdk.Trainium(16)}), set(sdk.Inferentia(1)), 1},
		{"the last of two sets", one(sdk.Trainium(4)), set(sdk.Inferentia(2), sdk.Inferentia(3)), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustStep(t, tc.flow, tc.opts, "s")
			n := strconv.Itoa(tc.want)
			if s.Neuron != tc.want || !cmp.Equal(s.Limits, q(neuronKey, n)) || !cmp.Equal(s.Requests, q(neuronKey, n)) {
				t.Errorf("Neuron %d, requests %v, limits %v; want %d of %s", s.Neuron, s.Requests, s.Limits, tc.want, neuronKey)
			}
		})
	}
}

// TestZeroWithNothingToTakeAway: a 0 that replaces no count is the error it was,
// and so is one beside a count of the same layer.
func TestZeroWithNothingToTakeAway(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name:    "trainium zero over a flow trainium zero",
			flow:    defaults([]sdk.FlowOption{sdk.Trainium(0)}, sdk.Trainium(0)),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"leave out sdk.Trainium"},
		},
		{
			name:    "neuron resource zero with no default",
			flow:    one(sdk.Resource(neuronKey, 0)),
			want:    field.ErrorList{field.Invalid(sAt("resources").Key(neuronKey), nil, "")},
			details: []string{"leave out sdk.Resource"},
		},
		{
			name:    "efa resource zero with no default",
			flow:    one(sdk.Resource(efaKey, 0)),
			want:    field.ErrorList{field.Invalid(sAt("resources").Key(efaKey), nil, "")},
			details: []string{"leave out sdk.Resource"},
		},
		{
			name: "trainium zero beside a neuron resource of the same layer",
			flow: defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Trainium(0), sdk.Resource(neuronKey, 4)),
			want: field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
		},
		{
			name:    "negative over a default",
			flow:    defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Trainium(-1)),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"leave out sdk.Trainium"},
		},
		{
			name:    "efa zero by set over no efa",
			flow:    one(sdk.Trainium(1)),
			opts:    set(sdk.EFA(0)),
			want:    field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
			details: []string{"the step asks no EFA interfaces for --set s.efa=0 to take away; leave that --set out"},
		},
		{
			// Wiring and its zero written side by side on the step: nothing to wire.
			name:    "step wiring beside its own efa zero",
			flow:    defaults([]sdk.FlowOption{sdk.EFA(8)}, sdk.EFA(0), sdk.EFAWiring()),
			want:    field.ErrorList{field.Invalid(sAt("efaWiring"), nil, "")},
			details: []string{"leave out sdk.EFAWiring"},
		},
		{
			name:    "step DRA beside its own zeroes",
			flow:    defaults([]sdk.FlowOption{sdk.Trainium(16)}, sdk.Trainium(0), sdk.DRA()),
			want:    field.ErrorList{field.Invalid(sAt("dra"), nil, "")},
			details: []string{"leave out sdk.DRA"},
		},
	})
}
