package compile

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"":                 "",
		"cpu":              "cpu",
		"image":            "image",
		"nodeSelector":     "node_selector",
		"imagePullSecrets": "image_pull_secrets",
		"imagePullPolicy":  "image_pull_policy",
		"serviceAccount":   "service_account",
		"runAsNonRoot":     "run_as_non_root",
		"gpuVendor":        "gpu_vendor",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// testLayers returns the step, flow and config layers of step "s" over the given specs.
func testLayers(step, flow, config *sdk.StepSpec) []layer {
	at := field.NewPath("steps").Key("s")
	return []layer{
		{spec: specOf(), path: at, name: same},
		{spec: step, path: at, name: same},
		{spec: flow, path: field.NewPath("flow"), name: same},
		{spec: config, path: field.NewPath("config"), name: snake},
	}
}

func specOf(opts ...sdk.StepOption) *sdk.StepSpec {
	var s sdk.StepSpec
	s.Apply(opts...)
	return &s
}

func TestMergePick(t *testing.T) {
	img := func(ref string) *sdk.StepSpec { return specOf(sdk.Image(ref)) }
	for _, tc := range []struct {
		name               string
		step, flow, config *sdk.StepSpec
		want               string
		wantAt             string
		wantSet            bool
	}{
		{"step wins", img("step"), img("flow"), img("config"), "step", "steps[s].image", true},
		{"flow over config", specOf(), img("flow"), img("config"), "flow", "flow.image", true},
		{"config last", specOf(), specOf(), img("config"), "config", "config.image", true},
		{"unset", specOf(), specOf(), specOf(), "", "", false},
		{"empty value still counts as set", img(""), img("flow"), specOf(), "", "steps[s].image", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := merge("s", field.NewPath("steps").Key("s"), testLayers(tc.step, tc.flow, tc.config))
			got := r.image
			at := ""
			if got.at != nil {
				at = got.at.String()
			}
			if got.v != tc.want || got.set != tc.wantSet || at != tc.wantAt {
				t.Errorf("image = {%q, set %t, at %q}, want {%q, set %t, at %q}", got.v, got.set, at, tc.want, tc.wantSet, tc.wantAt)
			}
		})
	}
}

func TestMergeConfigPathsAreSnakeCase(t *testing.T) {
	cfg := specOf(sdk.ImagePullPolicy("Always"), sdk.NodeSelector("zone", "a"), sdk.ImagePullSecret("ecr"))
	r := merge("s", field.NewPath("steps").Key("s"), testLayers(specOf(), specOf(), cfg))
	got := []string{r.imagePullPolicy.at.String(), r.nodeSelector[0].at.String(), r.imagePullSecrets[0].at.String()}
	want := []string{"config.image_pull_policy", "config.node_selector[zone]", "config.image_pull_secrets[0]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

func TestMergeConcat(t *testing.T) {
	step := specOf(sdk.Toleration("step", "", ""))
	flow := specOf(sdk.Toleration("flow-0", "", ""), sdk.Toleration("flow-1", "", ""))
	config := specOf(sdk.Toleration("config", "", ""))
	r := merge("s", field.NewPath("steps").Key("s"), testLayers(step, flow, config))
	var keys, paths []string
	for _, it := range r.tolerations {
		keys = append(keys, it.v.Key)
		paths = append(paths, it.at.String())
	}
	if diff := cmp.Diff([]string{"config", "flow-0", "flow-1", "step"}, keys); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	wantPaths := []string{"config.tolerations[0]", "flow.tolerations[0]", "flow.tolerations[1]", "steps[s].tolerations[0]"}
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

func TestMergeKeyed(t *testing.T) {
	config := specOf(sdk.Env("A", "config"), sdk.Env("B", "config"))
	flow := specOf(sdk.Env("C", "flow"), sdk.Env("B", "flow"))
	step := specOf(sdk.Env("A", "step"), sdk.Env("D", "step"))
	r := merge("s", field.NewPath("steps").Key("s"), testLayers(step, flow, config))
	var got []string
	for _, it := range r.env {
		got = append(got, it.v.Name+"="+it.v.Value+"@"+it.at.String())
	}
	want := []string{
		"A=step@steps[s].env[A]",
		"B=flow@flow.env[B]",
		"C=flow@flow.env[C]",
		"D=step@steps[s].env[D]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestMergeEFA(t *testing.T) {
	for _, tc := range []struct {
		name       string
		step, flow *sdk.StepSpec
		efa        int
		all        bool
		at         string
	}{
		{"step efa over flow all", specOf(sdk.EFA(4)), specOf(sdk.EFAAll()), 4, false, "steps[s].efa"},
		{"step all over flow efa", specOf(sdk.EFAAll()), specOf(sdk.EFA(4)), 0, true, "steps[s].efa"},
		{"flow all", specOf(), specOf(sdk.EFAAll()), 0, true, "flow.efa"},
		{"last in a step wins", specOf(sdk.EFAAll(), sdk.EFA(2)), specOf(), 2, false, "steps[s].efa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := merge("s", field.NewPath("steps").Key("s"), testLayers(tc.step, tc.flow, specOf()))
			top, _, errs := settle(r.efaCount, "EFA interfaces", "s")
			if len(errs) > 0 || len(top) != 1 {
				t.Fatalf("settle: %v, errors %v; want one source", top, errs)
			}
			if got := top[0]; got.n != int64(tc.efa) || got.all != tc.all || got.at.String() != tc.at {
				t.Errorf("efa %d, all %t at %s; want efa %d, all %t at %s", got.n, got.all, got.at, tc.efa, tc.all, tc.at)
			}
		})
	}
}

func planSteps(after map[string][]string, names ...string) []plan.Step {
	var out []plan.Step
	for _, n := range names {
		out = append(out, plan.Step{Name: n, After: after[n]})
	}
	return out
}

func TestOrderSteps(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		after map[string][]string
		want  []string
	}{
		{"empty", nil, nil, nil},
		{"independent", []string{"c", "b", "a"}, nil, []string{"c", "b", "a"}},
		{"chain declared backwards", []string{"c", "b", "a"}, map[string][]string{"c": {"b"}, "b": {"a"}}, []string{"a", "b", "c"}},
		{"free steps keep their place", []string{"x", "late", "y", "early"}, map[string][]string{"late": {"early"}}, []string{"x", "y", "early", "late"}},
		{"unknown names are ignored", []string{"a", "b"}, map[string][]string{"a": {"gone"}}, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := order(planSteps(tc.after, tc.names...), field.NewPath("steps"))
			if len(errs) > 0 {
				t.Fatalf("order: %v", errs.ToAggregate())
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOrderCycles(t *testing.T) {
	for _, tc := range []struct {
		name    string
		names   []string
		after   map[string][]string
		want    field.ErrorList
		members [][]string
	}{
		{
			name:    "two steps",
			names:   []string{"a", "b"},
			after:   map[string][]string{"a": {"b"}, "b": {"a"}},
			want:    field.ErrorList{field.Forbidden(field.NewPath("steps").Key("a").Child("after"), "")},
			members: [][]string{{"a", "b"}},
		},
		{
			name:    "three steps behind a free one",
			names:   []string{"free", "a", "b", "c"},
			after:   map[string][]string{"a": {"c"}, "b": {"a"}, "c": {"b"}},
			want:    field.ErrorList{field.Forbidden(field.NewPath("steps").Key("a").Child("after"), "")},
			members: [][]string{{"a", "b", "c"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := order(planSteps(tc.after, tc.names...), field.NewPath("steps"))
			if got != nil {
				t.Errorf("order returned steps for a cycle: %+v", got)
			}
			if diff := cmp.Diff(tc.want, errs, cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			for i, m := range tc.members {
				for _, name := range m {
					if i < len(errs) && !strings.Contains(errs[i].Detail, name) {
						t.Errorf("detail %q does not name %s", errs[i].Detail, name)
					}
				}
			}
		})
	}
}

func TestDedupe(t *testing.T) {
	a := field.Invalid(field.NewPath("flow", "trainium"), 0, "must be positive")
	b := field.Invalid(field.NewPath("flow", "trainium"), 0, "must be positive")
	c := field.Invalid(field.NewPath("flow", "efa"), 0, "must be positive")
	in := field.ErrorList{a, c, b, c}
	got := dedupe(in)
	want := field.ErrorList{a, c}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dedupe (-want +got):\n%s", diff)
	}
	if len(in) != 4 || in[2] != b {
		t.Errorf("dedupe changed its input: %v", in)
	}
}
