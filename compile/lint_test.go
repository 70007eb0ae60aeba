package compile_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

func TestLint(t *testing.T) {
	trn1 := []sdk.StepOption{sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16)}
	for _, tc := range []struct {
		name string
		opts []sdk.StepOption
		// want maps each warning's field to a phrase its detail must hold.
		want map[string]string
	}{{
		name: "multi-node Trainium on an EFA instance without EFA",
		opts: append(trn1, sdk.Nodes(2)),
		want: map[string]string{"steps[s].efa": "over TCP"},
	}, {
		name: "multi-node GPUs on an EFA instance without EFA",
		opts: []sdk.StepOption{sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.Nodes(4)},
		want: map[string]string{"steps[s].efa": "all 32 interfaces"},
	}, {
		name: "one node without EFA is fine",
		opts: trn1,
	}, {
		name: "several nodes of an instance type without EFA is fine",
		opts: []sdk.StepOption{sdk.InstanceType("inf2.48xlarge"), sdk.Inferentia(12), sdk.Nodes(2)},
	}, {
		name: "EFA without wiring",
		opts: append(trn1, sdk.EFA(8)),
		want: map[string]string{"steps[s].efaWiring": "add sdk.EFAWiring()"},
	}, {
		name: "EFA with wiring",
		opts: append(trn1, sdk.EFA(8), sdk.EFAWiring()),
	}, {
		name: "EFA wired by hand",
		opts: append(trn1, sdk.EFA(8), sdk.Env("FI_PROVIDER", "efa")),
	}, {
		name: "FI_PROVIDER=efa without EFA",
		opts: []sdk.StepOption{sdk.Env("FI_PROVIDER", "efa")},
		want: map[string]string{"steps[s].env[FI_PROVIDER]": "asks for no EFA"},
	}, {
		name: "another provider without EFA is fine",
		opts: []sdk.StepOption{sdk.Env("FI_PROVIDER", "tcp")},
	}, {
		name: "multi-node EFA on any instance family",
		opts: []sdk.StepOption{sdk.GPU(8), sdk.EFA(4), sdk.EFAWiring(), sdk.Nodes(2)},
		want: map[string]string{"steps[s].instanceType": "p4d and p4de"},
	}, {
		name: "multi-node EFA pinned to a family",
		opts: []sdk.StepOption{sdk.GPU(8), sdk.EFA(4), sdk.EFAWiring(), sdk.Nodes(2), sdk.NodeSelector("karpenter.k8s.aws/instance-family", "p4d")},
	}, {
		name: "multi-node EFA pinned to an instance type",
		opts: append(trn1, sdk.EFAAll(), sdk.EFAWiring(), sdk.Nodes(4)),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, one(tc.opts...), compile.Options{})
			got := map[string]string{}
			for _, w := range compile.Lint(p) {
				got[w.Field] = w.Detail
				if !strings.HasPrefix(w.Error(), w.Field+": ") {
					t.Errorf("Error() %q does not start with the field", w.Error())
				}
			}
			fields := func(m map[string]string) []string {
				var out []string
				for k := range m {
					out = append(out, k)
				}
				return out
			}
			if diff := cmp.Diff(fields(tc.want), fields(got), cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("warnings (-want +got):\n%s\ngot: %v", diff, got)
			}
			for field, phrase := range tc.want {
				if !strings.Contains(got[field], phrase) {
					t.Errorf("%s: %q does not say %q", field, got[field], phrase)
				}
			}
		})
	}
}
