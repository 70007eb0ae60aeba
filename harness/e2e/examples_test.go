// Package e2e_test runs every example's emitted objects on the simulated AWS
// cluster: created on a real API server, scheduled by the real scheduler onto
// fake nodes shaped like the instance types, and run to completion by the real
// controllers, with kwok standing in for the kubelet.
package e2e_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
)

func TestMain(m *testing.M) {
	code := simcluster.Main(m)
	exampletest.Cleanup()
	removeAirflowHome()
	os.Exit(code)
}

// planStep is a step as the flow's own `validate` command prints it: the
// compiled plan, independent of any target's rendering, which the tests hold
// the cluster's behaviour against.
type planStep struct {
	Name         string
	After        []string
	InstanceType string
	Neuron, EFA  int
	GPU          int
	Items        int // foreach items; 0 for a step that runs once
	Nodes        int // nodes of a multi-node step; 0 for one
	Retry        int // retries after a failure
	// DRA is set when the step claims its devices through DRA instead of
	// device-plugin resources.
	DRA bool
	// Wired is set when the step has EFA wiring, whose IPC_LOCK capability
	// needs Pod Security's privileged level.
	Wired bool
}

// example is one example flow, or a variant of one compiled with extra
// options: its plan and its compiled output.
type example struct {
	Name  string
	Steps []planStep
	bin   string
	// args are added to every validate and compile command; config, if set, is
	// written to the manifold.toml they read.
	args   []string
	config string
}

// step returns the plan step called name, or nil.
func (e *example) step(name string) *planStep {
	for i := range e.Steps {
		if e.Steps[i].Name == name {
			return &e.Steps[i]
		}
	}
	return nil
}

var (
	examplesMu    sync.Mutex
	examplesCache []*example
)

// examples builds every example and reads its plan, once per test process.
func examples(t *testing.T) []*example {
	t.Helper()
	examplesMu.Lock()
	defer examplesMu.Unlock()
	if examplesCache != nil {
		return examplesCache
	}
	bins := exampletest.Build(t)
	var out []*example
	for _, name := range exampletest.Names() {
		e := &example{Name: name, bin: bins[name]}
		e.readPlan(t)
		out = append(out, e)
	}
	if len(out) == 0 {
		t.Fatal("no examples")
	}
	examplesCache = out
	return out
}

// command returns the example's program run with args and the example's own
// options, in a directory holding its manifold.toml.
func (e *example) command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(e.bin, append(args, e.args...)...)
	cmd.Dir = t.TempDir()
	if e.config != "" {
		if err := os.WriteFile(filepath.Join(cmd.Dir, "manifold.toml"), []byte(e.config+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return cmd
}

// readPlan sets e.Steps from what `validate` prints.
func (e *example) readPlan(t *testing.T) {
	t.Helper()
	data, err := e.command(t, "validate").Output()
	if err != nil {
		t.Fatalf("%s validate: %v\n%s", e.Name, err, data)
	}
	if e.Steps, err = parsePlan(string(data)); err != nil {
		t.Fatalf("%s validate: %v\n%s", e.Name, err, data)
	}
}

// parsePlan reads the step lines of `validate`'s output: the name, then
// "; "-separated needs ("after a, b", "2 nodes", an instance type, "16 Neuron",
// "8 EFA", "8 GPU", "foreach ×3", ...).
func parsePlan(out string) ([]planStep, error) {
	var steps []planStep
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "target ") {
			break // each target's verdict follows the steps
		}
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		s := planStep{Name: name}
		for _, part := range strings.Split(strings.TrimSpace(rest), "; ") {
			if part == "" {
				continue
			}
			if after, ok := strings.CutPrefix(part, "after "); ok {
				s.After = strings.Split(after, ", ")
				continue
			}
			if items, ok := strings.CutPrefix(part, "foreach ×"); ok {
				n, err := strconv.Atoi(items)
				if err != nil {
					return nil, fmt.Errorf("step %s: %q", name, part)
				}
				s.Items = n
				continue
			}
			if _, ok := catalog.Lookup(part); ok {
				s.InstanceType = part
				continue
			}
			if retry, ok := strings.CutPrefix(part, "retry "); ok {
				n, err := strconv.Atoi(retry)
				if err != nil {
					return nil, fmt.Errorf("step %s: %q", name, part)
				}
				s.Retry = n
				continue
			}
			if part == "DRA" {
				s.DRA = true
				continue
			}
			n, unit, ok := strings.Cut(part, " ")
			unit, wired, _ := strings.Cut(unit, " ") // "8 EFA (wired)"
			s.Wired = s.Wired || wired == "(wired)"
			count, err := strconv.Atoi(n)
			if !ok || err != nil {
				continue // timeout: not what placement depends on
			}
			switch unit {
			case "Neuron":
				s.Neuron = count
			case "EFA":
				s.EFA = count
			case "GPU":
				s.GPU = count
			case "nodes":
				s.Nodes = count
			}
		}
		steps = append(steps, s)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("no steps in the output")
	}
	return steps, nil
}

// compileTarget runs `<example> compile --target target` and returns the objects
// of the files it wrote.
func (e *example) compileTarget(t *testing.T, target string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	cmd := e.command(t, "compile", "--target", target, "-o", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s compile --target %s: %v\n%s", e.Name, target, err, out)
	}
	return readObjects(t, dir)
}

// readObjects returns the objects of the YAML files compile wrote in dir.
func readObjects(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("compile wrote no YAML in %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		o, err := simcluster.Decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		objs = append(objs, o...)
	}
	return objs
}
