package compile_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

// The node labels of a node's host and zone, spelt out.
const (
	hostname = "kubernetes.io/hostname"
	zoneKey  = "topology.kubernetes.io/zone"
)

func TestTopology(t *testing.T) {
	for _, tc := range []struct {
		name            string
		opts            []sdk.StepOption
		apart, together string
	}{
		{"one pod has no placement terms", []sdk.StepOption{sdk.EFA(1)}, "", ""},
		{"several nodes: one pod per node", []sdk.StepOption{sdk.Nodes(2)}, hostname, ""},
		{"several nodes with EFA: one zone too", []sdk.StepOption{sdk.Nodes(2), sdk.EFA(4)}, hostname, zoneKey},
		{"AnyZone lets EFA pods span zones", []sdk.StepOption{sdk.Nodes(2), sdk.EFA(4), sdk.AnyZone()}, hostname, ""},
		{"SameZone without EFA", []sdk.StepOption{sdk.Nodes(3), sdk.SameZone()}, hostname, zoneKey},
		{"the last of SameZone and AnyZone wins", []sdk.StepOption{sdk.Nodes(2), sdk.SameZone(), sdk.AnyZone()}, hostname, ""},
		{"Spread chooses the label pods differ in", []sdk.StepOption{sdk.Nodes(2), sdk.EFA(4), sdk.Spread("topology.k8s.aws/network-node-layer-3")}, "topology.k8s.aws/network-node-layer-3", zoneKey},
		{"Spread over zones without EFA", []sdk.StepOption{sdk.Nodes(2), sdk.Spread(zoneKey)}, zoneKey, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustStep(t, one(tc.opts...), compile.Options{}, "s")
			if s.Apart != tc.apart || s.Together != tc.together {
				t.Errorf("apart %q, together %q; want %q, %q", s.Apart, s.Together, tc.apart, tc.together)
			}
		})
	}

	// From the flow, the options place the multi-node steps and leave the others be.
	p := mustCompile(t, sdk.NewFlow("f", sdk.Image(img), sdk.SameZone(), sdk.Spread("rack")).
		Step("one", sdk.Command("true")).
		Step("two", sdk.Command("true"), sdk.Nodes(2)), compile.Options{})
	if one, two := p.Step("one"), p.Step("two"); one.Apart != "" || one.Together != "" || two.Apart != "rack" || two.Together != zoneKey {
		t.Errorf("flow defaults: one %q/%q, two %q/%q", one.Apart, one.Together, two.Apart, two.Together)
	}
}

func TestTopologyErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{name: "SameZone on one pod", flow: one(sdk.SameZone()),
			want: field.ErrorList{field.Forbidden(sAt("zone"), "")}, details: []string{"add sdk.Nodes(n)"}},
		{name: "AnyZone on one pod", flow: one(sdk.AnyZone()),
			want: field.ErrorList{field.Forbidden(sAt("zone"), "")}},
		{name: "Spread on one pod", flow: one(sdk.Spread("rack")),
			want: field.ErrorList{field.Forbidden(sAt("spread"), "")}},
		{name: "Spread without a label", flow: one(sdk.Nodes(2), sdk.Spread("")),
			want: field.ErrorList{field.Required(sAt("spread"), "")}},
		{name: "Spread over a bad label", flow: one(sdk.Nodes(2), sdk.Spread("not a label")),
			want: field.ErrorList{field.Invalid(sAt("spread"), nil, "")}},
		{name: "Spread over zones with EFA", flow: one(sdk.Nodes(2), sdk.EFA(2), sdk.Spread(zoneKey)),
			want: field.ErrorList{field.Invalid(sAt("spread"), nil, "")}, details: []string{"add sdk.AnyZone()"}},
		{name: "Spread over zones with SameZone", flow: one(sdk.Nodes(2), sdk.SameZone(), sdk.Spread(zoneKey)),
			want: field.ErrorList{field.Invalid(sAt("spread"), nil, "")}, details: []string{"contradicts sdk.SameZone()"}},
	})
	// Spread over zones is fine once AnyZone lets the EFA pods span them.
	mustCompile(t, one(sdk.Nodes(2), sdk.EFA(2), sdk.Spread(zoneKey), sdk.AnyZone()), compile.Options{})
}
