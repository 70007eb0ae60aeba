package emit_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// opReader hands out the bytes of a fuzzed option sequence.
type opReader struct{ b []byte }

func (r *opReader) more() bool { return len(r.b) > 0 }

func (r *opReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	b := r.b[0]
	r.b = r.b[1:]
	return b
}

// small is a count from -8 to 39: the interesting range of every count.
func (r *opReader) small() int { return int(r.byte()%48) - 8 }

// text is one of a few strings that mean something to some option, or the
// fuzzer's own.
func (r *opReader) text(s string) string {
	words := []string{s, "", "trn1.32xlarge", "trn2.48xlarge", "p5.48xlarge", "inf2.xlarge", "a", "b", "4", "16Gi",
		"topology.kubernetes.io/zone", "example.com/fpga", "amd", "Always", "FI_PROVIDER", "efa", "$(A)", "{{x}}"}
	return words[int(r.byte())%len(words)]
}

// fuzzOptions are the step options a fuzzed sequence draws from, each made
// from the reader.
var fuzzOptions = []func(r *opReader, s string) sdk.StepOption{
	func(r *opReader, s string) sdk.StepOption { return sdk.Command(r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Run(func(*sdk.Context) error { return nil }) },
	func(r *opReader, s string) sdk.StepOption { return sdk.After(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Foreach(r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.CPU(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Memory(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.SharedMemory(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.GPU(r.small()) },
	func(r *opReader, s string) sdk.StepOption { return sdk.GPUVendor(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Trainium(r.small()) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Inferentia(r.small()) },
	func(r *opReader, s string) sdk.StepOption { return sdk.EFA(r.small()) },
	func(r *opReader, s string) sdk.StepOption { return sdk.EFAAll() },
	func(r *opReader, s string) sdk.StepOption { return sdk.EFAWiring() },
	func(r *opReader, s string) sdk.StepOption { return sdk.EFAArch(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.DRA() },
	func(r *opReader, s string) sdk.StepOption { return sdk.Claim(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Resource(r.text(s), int64(r.small())) },
	func(r *opReader, s string) sdk.StepOption { return sdk.InstanceType(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.NodeSelector(r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Toleration(r.text(s), r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.SameZone() },
	func(r *opReader, s string) sdk.StepOption { return sdk.AnyZone() },
	func(r *opReader, s string) sdk.StepOption { return sdk.Spread(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Image(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Env(r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.SecretEnv(r.text(s), r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Label(r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Annotation(r.text(s), r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Volume(r.text(s), "/"+r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Port(r.small() * 1000) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Nodes(r.small()) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Retry(r.small()) },
	func(r *opReader, s string) sdk.StepOption {
		return sdk.Timeout(time.Duration(r.small()) * time.Minute)
	},
	func(r *opReader, s string) sdk.StepOption { return sdk.RunAsUser(int64(r.small())) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Queue(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Priority(r.text(s)) },
	func(r *opReader, s string) sdk.StepOption { return sdk.Topology(r.text(s)) },
}

// FuzzFlowOptions builds a flow of up to three steps from a fuzzed sequence of
// options and checks that compile never panics, gives every error a type and a
// path, and that every target renders a plan it compiled to files that parse,
// or says (with a path, never an internal error) what it cannot express.
func FuzzFlowOptions(f *testing.F) {
	f.Add([]byte{0, 1, 2, 9, 3, 11, 8, 31, 2}, "train")
	f.Add([]byte{0, 0, 0, 12, 18, 3, 13, 15, 31, 3, 9, 4}, "p5.48xlarge")
	f.Add([]byte{1, 25, 14, 15, 3, 26, 16, 16, 16, 21, 23, 10}, "{{ x }}")
	f.Add([]byte{4, 32, 33, 34, 5, 6, 7, 29, 27, 28, 22, 19, 20}, "yes: no")
	f.Fuzz(func(t *testing.T, ops []byte, s string) {
		if len(ops) > 96 {
			ops = ops[:96]
		}
		r := &opReader{b: ops}
		names := []string{"a", "b", s}
		opts := make([][]sdk.StepOption, len(names))
		for r.more() {
			i := int(r.byte()) % len(names)
			opts[i] = append(opts[i], fuzzOptions[int(r.byte())%len(fuzzOptions)](r, s))
		}
		flow := sdk.NewFlow("fuzz", sdk.Image("example.com/flow:v1"))
		for i, name := range names {
			flow.Step(name, opts[i]...)
		}
		p, errs := compile.Compile(flow, compile.Options{})
		for _, e := range errs {
			if e.Type == "" || e.Field == "" {
				t.Fatalf("error without a type or path: %#v", e)
			}
		}
		if p == nil {
			return
		}
		for _, target := range targets.All() {
			files, errs := emit.Files(target, p)
			for _, e := range errs {
				if e.Type == field.ErrorTypeInternal {
					t.Fatalf("%s: %v", target.Name(), e)
				}
			}
			for _, file := range files {
				parses(t, file)
			}
		}
	})
}

// FuzzArgoTemplating: a value reaches the container of the pod Argo runs byte
// for byte, though Argo substitutes {{...}} in templates: a command's argument,
// a variable, a foreach item and a param's default, after Argo's own
// substitution (harness/argopod), are given to the container by the kubelet as
// the job target's are (argopod.Expanded, with the argo target's ConfigMap);
// and no "{{" but Argo's own tags, which the target writes, is left in the
// WorkflowTemplate. A value that Argo's substitution cannot write as JSON
// (argopod.Escape) is refused instead, at the param's default and the item,
// which Argo substitutes.
func FuzzArgoTemplating(f *testing.F) {
	for _, s := range []string{"{{workflow.name}}", "{{=sprig.trunc(1, 'x')}}", "{{ inputs.parameters.item }}", "{% raw %}{{x}}{% endraw %}",
		"$(A)", "$$(A)", "{{", "}}", "{{}}", "{{item}}", "a{{b}}c{{", "\\{{x}}", "$({{x", "$(a{{b)", "${{", "{{$\xc3\xa9", "{{$(MANIFOLD_PARAM_P)",
		"$(MANIFOLD_BRACES)", "$$(MANIFOLD_BRACES)", "{{$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES){{x}}$$$(MANIFOLD_BRACES)",
		"\x1b", "\x7f", "{{\a}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, errs := compile.Compile(sdk.NewFlow("f", sdk.Image("example.com/flow:v1"), sdk.Param("p", s)).
			Step("s", sdk.Command("echo", s), sdk.Env("V", s), sdk.Foreach("x", s)), compile.Options{})
		if len(errs) > 0 {
			return // not UTF-8, say: compile refuses it with a path (FuzzFlowOptions)
		}
		wt, errs := argo.WorkflowTemplate(p)
		if len(errs) > 0 {
			// Only a value Argo's substitution cannot write as JSON, in the
			// param's default and the item, where Argo substitutes it.
			for _, e := range errs {
				if e.Field != "params[p].default" && e.Field != "steps[s].foreach[1]" || json.Valid([]byte(`"`+argopod.Escape(s)+`"`)) {
					t.Errorf("the argo target refuses %q at %s: %s", s, e.Field, e.Detail)
				}
			}
			return
		}
		checkArgoPod(t, p, wt, s)
	})
}

// argoTags are the template tags the argo target writes itself.
var argoTags = []string{"{{workflow.parameters.p}}", "{{workflow.parameters." + argo.ParamTraceParent + "}}", "{{inputs.parameters.item}}", "{{inputs.parameters.index}}", "{{item.value}}", "{{item.index}}"}

func checkArgoPod(t *testing.T, p *plan.Flow, wt *wfv1.WorkflowTemplate, s string) {
	t.Helper()
	data, err := json.Marshal(wt)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, tag := range argoTags {
		text = strings.ReplaceAll(text, tag, "")
	}
	if strings.Contains(text, "{{") {
		t.Errorf("%q: the WorkflowTemplate holds a {{ that Argo would take for a tag: %s", s, data)
	}
	pod, err := argopod.Resolve(wt, argo.TaskName("s"), 1)
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
		t.Errorf("%q: the kubelet gives Argo's container other values than the Job's (-job +argo):\n%s", s, diff)
	}
}
