// Package examples_test runs the example flows' Run steps as their containers would:
// `<flow> step NAME` with the environment every target gives the pod.
package examples_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/harness/exampletest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	exampletest.Cleanup()
	os.Exit(code)
}

// step runs `<example> step NAME` with MANIFOLD_RUN_DIR=runDir and extra env.
func step(t *testing.T, example, runDir, name string, env ...string) string {
	t.Helper()
	cmd := exec.Command(exampletest.Build(t)[example], "step", name)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "MANIFOLD_RUN_DIR="+runDir)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s step %s: %v\n%s", example, name, err, out)
	}
	return string(out)
}

func artifact[T any](t *testing.T, path ...string) T {
	t.Helper()
	var v T
	data, err := os.ReadFile(filepath.Join(path...) + ".json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHelloPassesData(t *testing.T) {
	run := t.TempDir()
	step(t, "hello", run, "greet", "MANIFOLD_PARAM_NAME=manifold")
	out := step(t, "hello", run, "shout")
	if got := artifact[string](t, run, "greet", "greeting"); got != "hello, manifold" {
		t.Errorf("greeting = %q", got)
	}
	if got := artifact[string](t, run, "shout", "shout"); got != "HELLO, MANIFOLD!" {
		t.Errorf("shout = %q", got)
	}
	if !strings.Contains(out, "HELLO, MANIFOLD!") {
		t.Errorf("shout printed %q", out)
	}
}

func TestHelloParamDefault(t *testing.T) {
	run := t.TempDir()
	step(t, "hello", run, "greet")
	if got := artifact[string](t, run, "greet", "greeting"); got != "hello, world" {
		t.Errorf("greeting = %q, want the param's default", got)
	}
}

func TestForeachFansOutAndJoins(t *testing.T) {
	run := t.TempDir()
	step(t, "foreach", run, "plan")
	regions := artifact[[]string](t, run, "plan", "regions")
	if len(regions) != 3 {
		t.Fatalf("regions = %q", regions)
	}
	for i, r := range regions {
		step(t, "foreach", run, "process", "MANIFOLD_ITEM="+r, "MANIFOLD_INDEX="+strconv.Itoa(i))
	}
	step(t, "foreach", run, "report")
	want := "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects"
	if diff := cmp.Diff(want, artifact[string](t, run, "report", "summary")); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if got := artifact[string](t, run, "process", "1", "result"); got != "us-west-2: 200 objects" {
		t.Errorf("item 1 result = %q", got)
	}
}

func TestNeuronTrainRunSteps(t *testing.T) {
	run := t.TempDir()
	step(t, "neuron-train", run, "prepare", "MANIFOLD_PARAM_EPOCHS=5")
	step(t, "neuron-train", run, "evaluate", "MANIFOLD_PARAM_EPOCHS=5")
	report := artifact[map[string]any](t, run, "evaluate", "report")
	if diff := cmp.Diff(map[string]any{"shards": 4.0, "epochs": "5"}, report); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
}

// TestEveryExampleValidates: every example is valid, every target takes it,
// and it has no warning (--strict): examples are what users copy. Those whose
// steps pass data need an artifact store on a cluster, as their docs say:
// without one, --strict refuses them for it, naming their Run steps; with one,
// it takes them.
func TestEveryExampleValidates(t *testing.T) {
	// The examples whose Run steps put and get artifacts, by their code.
	passData := map[string][]string{
		"hello":        {"greet", "shout"},
		"foreach":      {"plan", "process", "report"},
		"neuron-train": {"prepare", "evaluate"},
	}
	validate := func(bin string, args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"validate", "--strict"}, args...)...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for name, bin := range exampletest.Build(t) {
		if slices.Contains(exampletest.Dynamic, name) {
			// Valid, and the engines take it, but the static targets cannot:
			// not --strict.
			cmd := exec.Command(bin, "validate", "--artifacts", "s3://ml-artifacts/flows")
			cmd.Dir = t.TempDir()
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "flow "+name+" is valid") ||
				!strings.Contains(string(out), "targets that can take the flow: argo, airflow (not job, jobset)") {
				t.Errorf("%s validate: %v\n%s", name, err, out)
			}
			continue
		}
		var args []string
		if steps, ok := passData[name]; ok {
			out, err := validate(bin)
			var paths []string
			for _, s := range steps {
				paths = append(paths, "steps["+s+"]")
			}
			if want := "artifacts: the flow has no artifact store, but its Run steps (" + strings.Join(paths, ", ") + ")"; err == nil || !strings.Contains(out, want) {
				t.Errorf("%s validate --strict without a store: %v, want it refused with %q\n%s", name, err, want, out)
			}
			args = []string{"--artifacts", "s3://ml-artifacts/flows"}
		}
		if out, err := validate(bin, args...); err != nil || !strings.Contains(out, "flow "+name+" is valid") {
			t.Errorf("%s validate %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
}
