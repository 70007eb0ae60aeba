package kubevalidate_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/harness/kubevalidate"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubevalidate.Cleanup()
	os.Exit(code)
}

// TestRejectsBrokenJobs shows the check can fail: each mistake in broken.yaml is
// reported at its field.
func TestRejectsBrokenJobs(t *testing.T) {
	out, ok := kubevalidate.Run(t, "testdata/broken.yaml")
	if ok {
		t.Fatalf("broken Jobs passed:\n%s", out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "testdata/broken.yaml: ") {
			got = append(got, strings.TrimPrefix(line, "testdata/broken.yaml: "))
		}
	}
	want := []string{
		`document 0: Job mismatch: spec.template.spec.containers[0].resources.requests: Invalid value: "4": must be equal to aws.amazon.com/neuron limit of 16`,
		`document 1: Job toleration: spec.template.spec.tolerations[0].operator: Invalid value: "x": value must be empty when ` + "`operator`" + ` is 'Exists'`,
		`document 1: Job toleration: spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"`,
		`document 2: decode: strict decoding error: unknown field "spec.template.spec.containers[0].tolerations"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s\nfull output:\n%s", diff, out)
	}
}

func TestAcceptsAValidJob(t *testing.T) {
	path := t.TempDir() + "/ok.yaml"
	job := `apiVersion: batch/v1
kind: Job
metadata:
  name: ok
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources:
          limits: {aws.amazon.com/neuron: "16"}
          requests: {aws.amazon.com/neuron: "16"}
`
	if err := os.WriteFile(path, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := kubevalidate.Run(t, path); !ok {
		t.Errorf("a valid Job was refused:\n%s", out)
	}
}
