package job_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/sdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubevalidate.Cleanup()
	os.Exit(code)
}

// adversarial holds strings that break naive YAML: quotes, colons, newlines,
// document markers, comments, YAML's own keywords, numbers that must stay strings,
// and templating that must reach the pod literally.
var adversarial = []string{
	`plain`, `"double" and 'single'`, "line one\nline two\n", "---\nkind: Secret", "# not a comment",
	"key: value", "yes", "no", "null", "~", "0123", "1e3", "", " leading and trailing ", "tab\there",
	`back\slash`, `{{ params.x }}`, `{{workflow.parameters.x}}`, `"""`, "ünïcödé ✓", "- item", "&anchor *alias",
}

// roundTrip emits f and checks that every document decodes, strictly, to exactly the
// Job that job.Objects built.
func roundTrip(t *testing.T, f *sdk.Flow) {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Skipf("flow does not compile: %v", errs.ToAggregate())
	}
	objs, errs := job.Objects(p)
	if len(errs) > 0 {
		t.Skipf("job target cannot express the flow: %v", errs.ToAggregate())
	}
	files, errs := emit.Files(job.Target{}, p)
	if len(errs) > 0 {
		t.Fatalf("Objects succeeded but Emit failed: %v", errs)
	}
	docs := bytes.Split(files[0].Data, []byte("\n---\n"))[1:] // the first part is the header
	if len(docs) != len(objs) {
		t.Fatalf("%d documents for %d objects", len(docs), len(objs))
	}
	for i, doc := range docs {
		var got batchv1.Job
		if err := yaml.UnmarshalStrict(doc, &got); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		if diff := cmp.Diff(objs[i].(*batchv1.Job), &got); diff != "" {
			t.Errorf("document %d does not decode to its Job (-built +decoded):\n%s", i, diff)
		}
	}
}

func adversarialFlow(s string) *sdk.Flow {
	return sdk.NewFlow("adv", sdk.Image("busybox"), sdk.Param("p", s)).
		Step("a", sdk.Command("sh", "-c", s, s), sdk.Env("VALUE", s), sdk.Annotation("example.com/note", s),
			sdk.Foreach(s, s+"2"))
}

func TestAdversarialValuesRoundTrip(t *testing.T) {
	for _, s := range adversarial {
		t.Run("", func(t *testing.T) { roundTrip(t, adversarialFlow(s)) })
	}
}

// TestAdversarialValuesAcceptedByAPIServerValidation: the same Jobs pass the API
// server's own validation.
func TestAdversarialValuesAcceptedByAPIServerValidation(t *testing.T) {
	var paths []string
	dir := t.TempDir()
	for i, s := range adversarial {
		paths = append(paths, writeJobs(t, adversarialFlow(s), dir, fmt.Sprintf("adversarial-%d", i)))
	}
	if out, ok := kubevalidate.Run(t, paths...); !ok {
		t.Errorf("the API server's validation refuses Jobs with adversarial values:\n%s", out)
	}
}

func FuzzEmitRoundTrip(f *testing.F) {
	for _, s := range adversarial {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { roundTrip(t, adversarialFlow(s)) })
}
