package argo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/sdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	argolint.Cleanup()
	kubevalidate.Cleanup()
	os.Exit(code)
}

// adversarial holds strings that break naive YAML: quotes, colons, newlines,
// document markers, comments, YAML's own keywords, numbers and booleans that must
// stay strings (Argo's CRD refuses a bare false where it wants a string).
var adversarial = []string{
	`plain`, `"double" and 'single'`, "line one\nline two\n", "---\nkind: Secret", "# not a comment",
	"key: value", "yes", "no", "false", "true", "null", "~", "0123", "1e3", "", " leading and trailing ",
	"tab\there", `back\slash`, `"""`, "ünïcödé ✓", "- item", "&anchor *alias", "$(HOME)", "}}",
}

func adversarialFlow(s string) *sdk.Flow {
	return sdk.NewFlow("adv", sdk.Image("busybox"), sdk.Param("p", s)).
		Step("a", sdk.Command("sh", "-c", s, s), sdk.Env("VALUE", s), sdk.Annotation("example.com/note", s),
			sdk.Foreach(s, s+"2")).
		Step("b", sdk.After("a"), sdk.Command("echo", s), sdk.Annotation("example.com/note", s))
}

// lintFlows are flows that use every option, the longest names, a schedule, and
// adversarial strings.
func lintFlows() map[string]*sdk.Flow {
	long := strings.Repeat("x", compile.MaxNameLength)
	flows := parityFlows()
	flows["longest-names"] = sdk.NewFlow(long, sdk.Image("busybox"), sdk.Schedule("0 3 * * *")).
		Step(long, sdk.Command("true"), sdk.Foreach("a", "b")).
		Step(strings.Repeat("y", compile.MaxNameLength), sdk.Command("true"), sdk.After(long))
	flows["cron"] = sdk.NewFlow("nightly", sdk.Image("busybox"), sdk.Schedule("@daily"), sdk.Namespace("ml"),
		sdk.Param("p", "false")).Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("a"))
	// Task names with dashes and digits in depends, which Argo parses as an expression.
	flows["dashes"] = sdk.NewFlow("dash-flow", sdk.Image("busybox")).
		Step("pre-process", sdk.Command("true")).
		Step("train-2", sdk.Command("true"), sdk.After("pre-process")).
		Step("3-eval", sdk.Command("true"), sdk.After("pre-process", "train-2"), sdk.Foreach("a"))
	for i, s := range adversarial {
		flows[fmt.Sprintf("adversarial-%d", i)] = adversarialFlow(s)
	}
	return flows
}

// TestShapesAcceptedByArgoLint: Argo's own validator, with strict decoding, accepts
// the output for every shape.
func TestShapesAcceptedByArgoLint(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for name, f := range lintFlows() {
		paths = append(paths, writeArgo(t, f, dir, name))
	}
	if out, ok := argolint.Run(t, paths...); !ok {
		t.Errorf("Argo's validator refuses the argo target's output:\n%s", out)
	}
}

// TestAdversarialValuesReachThePod: every adversarial string reaches the pod Argo
// would run exactly as the Job target's pod has it.
func TestAdversarialValuesReachThePod(t *testing.T) {
	for _, s := range adversarial {
		p := mustCompile(t, adversarialFlow(s))
		files, errs := emit.Files(argo.Target{}, p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		wt := decodeTemplate(t, files[0].Data)
		for i := range p.Steps {
			st := &p.Steps[i]
			for item, j := range job.Jobs(p, st) {
				got, err := argopod.Resolve(wt, argo.TaskName(st.Name), item)
				if err != nil {
					t.Fatal(err)
				}
				want := j.Spec.Template
				expanded(t, p, &want.Spec, &got.Spec)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), argopod.Untraced); diff != "" {
					t.Errorf("%q: step %s item %d (-job +argo):\n%s", s, st.Name, item, diff)
				}
			}
		}
	}
}

// TestResolvedPodsAcceptedByAPIServerValidation puts the pod Argo would run for
// every step through the API server's validation (tools/kubevalidate knows the
// built-in kinds only, so each pod goes in a Job; the WorkflowTemplate itself is
// Argo's validator's to check).
func TestResolvedPodsAcceptedByAPIServerValidation(t *testing.T) {
	var objects []any
	for name, f := range lintFlows() {
		p := mustCompile(t, f)
		wt, errs := argo.WorkflowTemplate(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for i := range p.Steps {
			s := &p.Steps[i]
			for item := range max(1, len(s.Foreach)) {
				pod, err := argopod.Resolve(wt, argo.TaskName(s.Name), item)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				objects = append(objects, &batchv1.Job{
					TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
					ObjectMeta: metav1.ObjectMeta{Name: emit.Name(emit.MaxNameLength, "argo", s.Name, fmt.Sprint(item)), Namespace: wt.Namespace},
					Spec:       batchv1.JobSpec{Template: pod},
				})
			}
		}
	}
	data, err := encode.YAML("", objects...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := kubevalidate.Run(t, path); !ok {
		t.Errorf("the API server's validation refuses the pods Argo would run:\n%s", out)
	}
}
