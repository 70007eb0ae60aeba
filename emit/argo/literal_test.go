package argo_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// braces is what BracesEnv holds in the container.
var braces = map[string]string{argo.BracesEnv: "{{"}

// TestCarry: each value is written without "{{", as the kubelet reads it back
// to the value's own expansion, whatever the container's other variables are.
func TestCarry(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"plain $(A) $$ $x ${", "plain $(A) $$ $x ${"}, // no "{{": as it is
		{"{{workflow.name}}", "$(MANIFOLD_BRACES)workflow.name}}"},
		{"{{ x }}", "$(MANIFOLD_BRACES) x }}"},
		{"{{{", "$(MANIFOLD_BRACES){"},
		{"a{{b}}$(A)", "a$(MANIFOLD_BRACES)b}}$(A)"},
		{"{{$$(A)", "$(MANIFOLD_BRACES)$$(A)"},
		{"$${{x", "$$$(MANIFOLD_BRACES)x"},
		{"${{x", "$$$(MANIFOLD_BRACES)x"},                       // "${" kept, its "{" begins "{{"
		{"{{$({{x", "$(MANIFOLD_BRACES)$$($(MANIFOLD_BRACES)x"}, // "$(" without ")"
		{"$(a{{b)", "$$(a$(MANIFOLD_BRACES)b)"},                 // names no variable: its own text
		{"$(a$b{{)", "$$(a$$b$(MANIFOLD_BRACES))"},
		{"{{$é", "$(MANIFOLD_BRACES)$é"}, // the kubelet's rewriting of "$é" kept
		{"{{ $", "$(MANIFOLD_BRACES) $"},
		{"{{\x00\xff\n", "$(MANIFOLD_BRACES)\x00\xff\n"},
		// The carrier's own name, written by a user, stays text.
		{"$(MANIFOLD_BRACES)", "$$(MANIFOLD_BRACES)"},
		{"$$(MANIFOLD_BRACES)", "$$(MANIFOLD_BRACES)"},
		{"$$$(MANIFOLD_BRACES)", "$$$$(MANIFOLD_BRACES)"},
		{"{{$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES)$$(MANIFOLD_BRACES)"},
		{"$(MANIFOLD_BRACES){{x}}$$(MANIFOLD_BRACES)", "$$(MANIFOLD_BRACES)$(MANIFOLD_BRACES)x}}$$(MANIFOLD_BRACES)"},
		{"$(MANIFOLD_BRACES)(x)", "$$(MANIFOLD_BRACES)(x)"},
	} {
		got := argo.Carry(c.in)
		if got != c.want {
			t.Errorf("Carry(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "{{") {
			t.Errorf("Carry(%q) = %q holds {{", c.in, got)
		}
		if want, got := argopod.Canonical(c.in, nil), argopod.Canonical(got, braces); got != want {
			t.Errorf("Carry(%q): the kubelet makes %q of it, of the value %q", c.in, got, want)
		}
	}
}

// TestBracesNameStaysText: a value that holds the carrier's own reference,
// $(MANIFOLD_BRACES), alone or with "{{" and "$$", reaches the container of
// Argo's pod as it reaches the Job's (where no such variable is defined): in a
// param's default, a command, a variable and a foreach item, in a flow whose
// steps read the carrier.
func TestBracesNameStaysText(t *testing.T) {
	for _, v := range []string{"$(MANIFOLD_BRACES)", "$$(MANIFOLD_BRACES)", "{{$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES){{", "a$(MANIFOLD_BRACES)b{{c}}$$$(MANIFOLD_BRACES)"} {
		p := mustCompile(t, sdk.NewFlow("names", sdk.Image("busybox"), sdk.Param("p", v)).
			Step("s", sdk.Command("echo", v), sdk.Env("V", v), sdk.Foreach("x", v)))
		wt, errs := argo.WorkflowTemplate(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		pod, err := argopod.Resolve(wt, "s", 1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := argopod.Expanded(pod.Spec.Containers[0], argo.Literals(p))
		if err != nil {
			t.Fatal(err)
		}
		want, err := argopod.Expanded(job.Jobs(p, p.Step("s"))[1].Spec.Template.Spec.Containers[0])
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, argopod.Untraced); diff != "" {
			t.Errorf("%q: the kubelet gives Argo's container other values than the Job's (-job +argo):\n%s", v, diff)
		}
	}
}

// literalFlow holds "{{", "$(...)" and odd bytes in every value the argo target
// carries: a param's default, a command, variables and foreach items.
func literalFlow(opts ...sdk.FlowOption) *sdk.Flow {
	return sdk.NewFlow("lit", append([]sdk.FlowOption{sdk.Image("busybox"), sdk.Param("p", "{{workflow.name}} $(HOME)")}, opts...)...).
		Step("a", sdk.Command("echo", "{{ x }}", "$(MANIFOLD_PARAM_P)", "$$(X)", "a{{b}}c{{", "\\{{x}}\x01é"),
			sdk.Env("V", "{{=sprig.trunc(1, 'x')}}"), sdk.Env("W", "$(V){{item}}"),
			sdk.Foreach("{{item}}", "{{inputs.parameters.item}}", "plain")).
		Step("b", sdk.After("a"), sdk.Command("true"))
}

// TestLiteralsCarried: a flow holding "{{" gets its ConfigMap, written to
// <flow>.literals.yaml: named after the flow, labelled as the flow's objects,
// in its namespace, holding "{{"; every step's container reads it first.
func TestLiteralsCarried(t *testing.T) {
	p := mustCompile(t, literalFlow(sdk.Namespace("ml")))
	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	if diff := cmp.Diff([]string{"lit.argo.yaml", "lit" + argo.LiteralsFileSuffix}, names); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	if !slices.Contains(argo.Target{}.Outputs("lit"), "lit"+argo.LiteralsFileSuffix) {
		t.Errorf("Outputs %v leaves out the ConfigMap's file", argo.Target{}.Outputs("lit"))
	}
	docs := bytes.Split(files[1].Data, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("%d documents after the header, want 1:\n%s", len(docs)-1, files[1].Data)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(docs[1], &cm); err != nil {
		t.Fatal(err)
	}
	var want corev1.ConfigMap
	want.APIVersion, want.Kind = "v1", "ConfigMap"
	want.Name, want.Namespace = "lit-literals", "ml"
	want.Labels = map[string]string{plan.LabelPartOf: plan.PartOf, plan.LabelFlow: "lit"}
	want.Data = map[string]string{argo.BracesKey: "{{"}
	if diff := cmp.Diff(want, cm); diff != "" {
		t.Errorf("ConfigMap (-want +got):\n%s", diff)
	}

	wt := decodeTemplate(t, files[0].Data)
	for _, step := range []string{"a", "b"} {
		for item := range 3 {
			pod, err := argopod.Resolve(wt, step, item)
			if err != nil {
				t.Fatal(err)
			}
			env := pod.Spec.Containers[0].Env
			if len(env) == 0 || env[0].Name != argo.BracesEnv || env[0].ValueFrom == nil || env[0].ValueFrom.ConfigMapKeyRef == nil ||
				env[0].ValueFrom.ConfigMapKeyRef.Name != cm.Name || env[0].ValueFrom.ConfigMapKeyRef.Key != argo.BracesKey {
				t.Errorf("step %s: the container does not read %s from the ConfigMap first: %+v", step, argo.BracesEnv, env)
			}
		}
	}
	// The one "{{" left are Argo's own tags, which the target writes.
	text := string(files[0].Data)
	for _, tag := range []string{"{{workflow.parameters.p}}", "{{workflow.parameters." + argo.ParamTraceParent + "}}", "{{inputs.parameters.item}}", "{{inputs.parameters.index}}", "{{item.value}}", "{{item.index}}"} {
		text = strings.ReplaceAll(text, tag, "")
	}
	if strings.Contains(text, "{{") {
		t.Errorf("the WorkflowTemplate holds a {{ of the flow's own:\n%s", files[0].Data)
	}

	plain := mustCompile(t, sdk.NewFlow("plain", sdk.Image("busybox")).Step("a", sdk.Command("echo", "$(HOME)")).
		Step("b", sdk.Command("true"), sdk.Foreach("x", "y")))
	if cm := argo.Literals(plain); cm != nil {
		t.Errorf("a flow without {{ or params has a ConfigMap: %+v", cm)
	}
	if files, _ := emit.Files(argo.Target{}, plain); len(files) != 1 {
		t.Errorf("a flow without {{ or params writes %d files", len(files))
	}
}

// TestParamsAlwaysCarried: a flow with a param whose default holds no "{{"
// still gets the ConfigMap, and its steps read BracesEnv first, so that a
// value a run gives the param (which may hold "{{") is carried as a default
// is.
func TestParamsAlwaysCarried(t *testing.T) {
	p := mustCompile(t, foreachFlow())
	cm := argo.Literals(p)
	if cm == nil {
		t.Fatal("a flow with params has no ConfigMap")
	}
	wt, errs := argo.WorkflowTemplate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// The run's value, as runtimes/argo's Trigger writes it.
	given := "{{workflow.name}} $(MANIFOLD_BRACES) {{=sprig.upper(\"x\")}}"
	for i := range wt.Spec.Arguments.Parameters {
		if prm := &wt.Spec.Arguments.Parameters[i]; prm.Name == "p" {
			prm.Value = wfv1.AnyStringPtr(argo.Carry(given))
		}
	}
	for _, step := range []string{"split", "work", "join"} {
		pod, err := argopod.Resolve(wt, step, 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := argopod.Expanded(pod.Spec.Containers[0], cm)
		if err != nil {
			t.Fatalf("step %s: %v", step, err)
		}
		if got, want := envValue(c, "MANIFOLD_PARAM_P"), argopod.Canonical(given, nil); got != want {
			t.Errorf("step %s: the container gets MANIFOLD_PARAM_P = %q, want %q", step, got, want)
		}
	}
}

// TestLiteralsNamePerFlow: the ConfigMap's name is the flow's own, a DNS label
// however long the flow's name is.
func TestLiteralsNamePerFlow(t *testing.T) {
	long := strings.Repeat("x", 63)
	names := map[string]bool{}
	for _, flow := range []string{"a", "a-literals", long, long[:62] + "y"} {
		name := argo.LiteralsName(flow)
		if len(name) > 63 || names[name] || strings.Trim(name, "-.") != name {
			t.Errorf("flow %s: ConfigMap %q (taken: %t)", flow, name, names[name])
		}
		names[name] = true
	}
}

// TestLiteralsRefusedWhereNothingStandsIn: an annotation, a volume's path and
// an image are not expanded by the kubelet, so a "{{" there is still refused,
// at its path, saying what to do.
func TestLiteralsRefusedWhereNothingStandsIn(t *testing.T) {
	p := mustCompile(t, sdk.NewFlow("f", sdk.Image("busybox")).
		Step("a", sdk.Command("true"), sdk.Annotation("example.com/n", "{{"), sdk.Volume("data", "/data/{{x}}")))
	p.Steps[0].Image = "busybox:{{x}}" // compile takes any image name; the argo target still looks
	_, errs := emit.Files(argo.Target{}, p)
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Field)
		if !strings.Contains(e.Detail, "template tag") {
			t.Errorf("%s: the error does not say why: %s", e.Field, e.Detail)
		}
	}
	if diff := cmp.Diff([]string{"steps[a].image", "steps[a].annotations[example.com/n]", "steps[a].volumes[0].path"}, paths); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
	if !strings.Contains(errs[1].Detail, "sdk.Env") {
		t.Errorf("the annotation's error does not say what to do: %s", errs[1].Detail)
	}
}

// TestLiteralsInManifests: a multi-node step's object reads BracesEnv from the
// ConfigMap in each node's container, where the values reach the container as
// on the jobset and job targets, in both argo_multi_node modes.
func TestLiteralsInManifests(t *testing.T) {
	f := sdk.NewFlow("lit", sdk.Image("busybox"), sdk.Param("p", "{{p}}")).
		Step("train", sdk.Command("echo", "{{ x }}", "$(HOME)"), sdk.Env("V", "a{{b}}"), sdk.Nodes(2), sdk.Foreach("{{i}}", "j"))
	for _, mode := range []string{plan.ArgoJobSet, plan.ArgoJob} {
		p := compileMode(t, f, mode)
		wt, errs := argo.WorkflowTemplate(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		cm := argo.Literals(p)
		s := p.Step("train")
		for item := range s.Foreach {
			m, err := argopod.Manifest(wt, "train", item, runUID)
			if err != nil {
				t.Fatal(err)
			}
			pods, err := argopod.ManifestPods(m)
			if err != nil {
				t.Fatal(err)
			}
			var want corev1.Container
			if mode == plan.ArgoJob {
				want = job.New(p, s, "x", emit.PodOptions{Item: emit.ItemAt(s, item)}).Spec.Template.Spec.Containers[0]
			} else {
				pods = pods[item : item+1]
				want = jobset.Build(p, s, "x", emit.PodOptions{}).Spec.ReplicatedJobs[item].Template.Spec.Template.Spec.Containers[0]
			}
			want, err = argopod.Expanded(want)
			if err != nil {
				t.Fatal(err)
			}
			for _, pod := range pods {
				got, err := argopod.Expanded(pod.Spec.Containers[0], cm)
				if err != nil {
					t.Fatalf("%s item %d: %v", mode, item, err)
				}
				// The param arrives as Argo substitutes it, the rank's address
				// for the run's name.
				if diff := cmp.Diff(envValue(want, "V"), envValue(got, "V")); diff != "" || !cmp.Equal(want.Command, got.Command) ||
					envValue(want, plan.EnvItem) != envValue(got, plan.EnvItem) || envValue(want, "MANIFOLD_PARAM_P") != envValue(got, "MANIFOLD_PARAM_P") {
					t.Errorf("%s item %d: the container gets command %q, V %q, item %q, param %q; want %q, %q, %q, %q", mode, item,
						got.Command, envValue(got, "V"), envValue(got, plan.EnvItem), envValue(got, "MANIFOLD_PARAM_P"),
						want.Command, envValue(want, "V"), envValue(want, plan.EnvItem), envValue(want, "MANIFOLD_PARAM_P"))
				}
			}
		}
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return "<unset>"
}
