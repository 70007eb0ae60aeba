package argolint_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/argolint"
)

func TestMain(m *testing.M) {
	code := m.Run()
	argolint.Cleanup()
	os.Exit(code)
}

// TestRejectsBrokenObjects shows the check can fail: each object of broken.yaml is
// refused, for its own mistake.
func TestRejectsBrokenObjects(t *testing.T) {
	out, ok := argolint.Run(t, "testdata/broken.yaml")
	if ok {
		t.Fatalf("broken objects passed:\n%s", out)
	}
	want := map[string]string{
		"document 0: WorkflowTemplate missing-template":   "nowhere",
		"document 1: WorkflowTemplate unknown-dependency": "b",
		"document 2: WorkflowTemplate undeclared-param":   "inputs.parameters.nope",
		"document 3: WorkflowTemplate: decode":            "string",
		"document 4: WorkflowTemplate: decode":            `unknown field "tolerations"`,
		"document 5: CronWorkflow bad-schedule":           "every day at three",
		"document 6: CronWorkflow dangling":               "not-here",
		"document 7: Workflow dangling-":                  "also-not-here",
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for prefix, detail := range want {
		found := false
		for _, line := range lines {
			rest, ok := strings.CutPrefix(line, "testdata/broken.yaml: "+prefix)
			if ok && strings.Contains(rest, detail) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem %q mentioning %q", prefix, detail)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("got %d problems, want %d", len(lines), len(want))
	}
	if t.Failed() {
		t.Logf("full output:\n%s", out)
	}
}

func TestAcceptsAValidTemplateAndCron(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ok.yaml")
	objects := `apiVersion: argoproj.io/v1alpha1
kind: WorkflowTemplate
metadata:
  name: ok
spec:
  entrypoint: DAG
  arguments:
    parameters:
    - name: p
      value: "false"
  templates:
  - name: DAG
    dag:
      tasks:
      - name: a
        template: a
  - name: a
    container:
      image: busybox
      env:
      - name: P
        value: "{{workflow.parameters.p}}"
---
apiVersion: argoproj.io/v1alpha1
kind: CronWorkflow
metadata:
  name: ok
spec:
  schedules: ["0 3 * * *"]
  workflowSpec:
    workflowTemplateRef:
      name: ok
`
	if err := os.WriteFile(path, []byte(objects), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := argolint.Run(t, path); !ok {
		t.Errorf("valid objects were refused:\n%s", out)
	}
}
