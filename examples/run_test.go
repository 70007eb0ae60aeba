package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/harness/exampletest"
)

// run runs `<example> run --run-id test args...` in a fresh directory, as a user
// would, and returns the run directory and what the program printed.
func run(t *testing.T, example string, args ...string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(exampletest.Build(t)[example], append([]string{"run", "--run-id", "test"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s run: %v\n%s", example, err, out)
	}
	return filepath.Join(dir, ".manifold", "runs", "test"), string(out)
}

func TestHelloRuns(t *testing.T) {
	runDir, out := run(t, "hello", "--param", "name=manifold")
	if got := artifact[string](t, runDir, "greet", "greeting"); got != "hello, manifold" {
		t.Errorf("greeting = %q", got)
	}
	if got := artifact[string](t, runDir, "shout", "shout"); got != "HELLO, MANIFOLD!" {
		t.Errorf("shout = %q", got)
	}
	// The Command step's shell reads the param from its variable, as on Kubernetes.
	log, err := os.ReadFile(filepath.Join(runDir, "_steps", "echo", "stdout.log"))
	if err != nil {
		t.Fatal(err)
	}
	if string(log) != "hello, manifold, from a Command step\n" {
		t.Errorf("echo printed %q", log)
	}
	for _, want := range []string{"greet | hello, manifold\n", "shout | HELLO, MANIFOLD!\n", "echo  | hello, manifold, from a Command step\n", "run test succeeded in "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestHelloParamIsData: a param's value reaches the Command step's shell as
// data, whatever it holds; the script reads the variable, so no quote, `;` or
// $(…) in the value is parsed by the shell.
func TestHelloParamIsData(t *testing.T) {
	for _, name := range hostileNames {
		runDir, out := run(t, "hello", "--param", "name="+name)
		log, err := os.ReadFile(filepath.Join(runDir, "_steps", "echo", "stdout.log"))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("hello, "+name+", from a Command step\n", string(log)); diff != "" {
			t.Errorf("param %q: echo printed (-want +got):\n%s", name, diff)
		}
		// A line of the step's own, as an injected command prints it.
		if strings.Contains(out, "| INJECTED") {
			t.Errorf("param %q ran in the shell:\n%s", name, out)
		}
	}
}

func TestForeachRuns(t *testing.T) {
	runDir, _ := run(t, "foreach", "--max-parallel", "3")
	want := "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects"
	if diff := cmp.Diff(want, artifact[string](t, runDir, "report", "summary")); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	for i, region := range []string{"us-east-1", "us-west-2", "eu-west-1"} {
		got := artifact[string](t, runDir, "process", strconv.Itoa(i), "result")
		if !strings.HasPrefix(got, region+": ") {
			t.Errorf("item %d result = %q", i, got)
		}
	}
}

// TestNeuronTrainRunsLocally: on a machine without torchrun, the run is
// refused before any step runs, naming train's program and what to do.
func TestNeuronTrainRunsLocally(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(exampletest.Build(t)["neuron-train"], "run", "--run-id", "test")
	cmd.Dir = dir
	// A PATH without torchrun, whatever this machine has.
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 {
		t.Fatalf("exit %d (%v), want 1:\n%s", code, err, out)
	}
	for _, want := range []string{
		`steps[train].command[0]: Not found: "torchrun": not found in PATH`,
		"rehearse it here with those steps stubbed: run --stub train",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".manifold", "runs", "test")); !os.IsNotExist(err) {
		t.Errorf("the refused run left its directory: %v", err)
	}
}

// TestNeuronTrainRehearses runs the README's command line, `neuron-train run
// --stub train`, on a machine without torchrun: prepare and evaluate run,
// train is stubbed, and the run succeeds as a rehearsal.
func TestNeuronTrainRehearses(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(exampletest.Build(t)["neuron-train"], "run", "--stub", "train")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("neuron-train run --stub train: %v\n%s", err, out)
	}
	for _, want := range []string{
		"prepare  | prepared 4 shards for 3 epochs\n",
		"train: stubbed: its program did not run\n",
		"evaluate | evaluated the model trained on 4 shards\n",
		"; a rehearsal: train stubbed, its program not run\n",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	runs, err := os.ReadDir(filepath.Join(dir, ".manifold", "runs"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v %v", runs, err)
	}
	runDir := filepath.Join(dir, ".manifold", "runs", runs[0].Name())
	report := artifact[map[string]any](t, runDir, "evaluate", "report")
	if diff := cmp.Diff(map[string]any{"shards": 4.0, "epochs": "3"}, report); diff != "" {
		t.Errorf("evaluate's report (-want +got):\n%s", diff)
	}
}
