package local_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestProgramInTheStepsPath: a Command step's program is found in the PATH
// the step sets, as a container's is, not in the runner's.
func TestProgramInTheStepsPath(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "mytool"), []byte("#!/bin/sh\necho from mytool\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	flow := sdk.NewFlow("pathflow", sdk.Image("registry.example.com/path:v1")).
		Step("use", sdk.Command("mytool"), sdk.Env("PATH", bin+":/usr/bin:/bin"))
	r := runFlow(t, t.Context(), flow, local.Options{})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	if got := readFile(t, record.StateDir(r.res.Dir, "use", -1), record.StdoutLog); got != "from mytool\n" {
		t.Errorf("use printed %q", got)
	}
}

// missingFlow's train runs a program no machine has; after waits for it.
func missingFlow(counts string) *sdk.Flow {
	count := func(name string) sdk.StepOption {
		return sdk.Command("sh", "-c", fmt.Sprintf(`echo x >> %q`, filepath.Join(counts, name)))
	}
	return sdk.NewFlow("missingflow", sdk.Image("registry.example.com/missing:v1")).
		Step("first", count("first")).
		Step("train", sdk.After("first"), sdk.Command("manifold-test-no-such-program", "--epochs", "1"), sdk.Retry(2)).
		Step("each", sdk.After("first"), sdk.Foreach("a", "b"), sdk.Command("manifold-test-no-such-program-either")).
		Step("after", sdk.After("train"), count("after"))
}

// TestMissingProgramsRefused: a run whose Command steps' programs this
// machine lacks is refused before any step runs, naming each step, its
// program and what to do; nothing is recorded.
func TestMissingProgramsRefused(t *testing.T) {
	counts := t.TempDir()
	r := runFlow(t, t.Context(), missingFlow(counts), local.Options{RunID: "r1"})
	var missing *local.MissingError
	if !errors.As(r.err, &missing) || r.res != nil {
		t.Fatalf("run: %v (result %+v), want a MissingError and no result", r.err, r.res)
	}
	want := "flow missingflow cannot run on this machine, which lacks the programs of 2 steps:\n" +
		"  steps[train].command[0]: Not found: \"manifold-test-no-such-program\": not found in PATH\n" +
		"  steps[each].command[0]: Not found: \"manifold-test-no-such-program-either\": not found in PATH\n" +
		"install them on this machine, run the flow on a cluster (run --kube), or rehearse it here with those steps stubbed: run --stub train --stub each"
	if r.err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", r.err, want)
	}
	if _, err := os.Stat(filepath.Join(r.root, "r1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused run left a run directory: %v", err)
	}
	if entries, _ := os.ReadDir(counts); len(entries) > 0 {
		t.Errorf("a step ran: %v", entries)
	}
	if r.stdout != "" {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// TestStub: stubbed steps do not run their programs and succeed, recorded and
// shown as stubbed; an unknown step is refused. Resuming the run with a step
// no longer stubbed runs it, and the steps that wait for it, for real.
func TestStub(t *testing.T) {
	counts := t.TempDir()
	root := t.TempDir()
	flow := missingFlow(counts)
	p := compileFlow(t, flow, nil)

	if r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "r1", Stub: []string{"train", "trian"}}); r.err == nil ||
		r.err.Error() != `stub trian: flow missingflow has no step "trian"; did you mean train?; its steps are first, train, each, after` || r.res != nil {
		t.Errorf("stubbing an unknown step: %v", r.err)
	}
	// each is not stubbed: its program is missing.
	if r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "r1", Stub: []string{"train"}}); !strings.Contains(fmt.Sprint(r.err), "run --stub each") {
		t.Errorf("stubbing train alone: %v", r.err)
	}

	r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "r1", Stub: []string{"train", "each"}})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	rec, tasks := r.tasks(t)
	if rec.State != record.Succeeded {
		t.Errorf("run state %s", rec.State)
	}
	for _, label := range []string{"train", "each[0]", "each[1]"} {
		got := tasks[label]
		if got.State != record.Succeeded || !got.Stubbed || got.Attempts != 0 || got.ExitCode != nil || got.Start.IsZero() {
			t.Errorf("%s: %+v, want succeeded, stubbed, without attempts", label, got)
		}
		if _, err := os.Stat(record.StateDir(r.res.Dir, got.Step, -1)); err != nil {
			t.Errorf("%s: %v", label, err)
		}
	}
	for _, label := range []string{"first", "after"} {
		if got := tasks[label]; got.State != record.Succeeded || got.Stubbed || got.Attempts != 1 {
			t.Errorf("%s: %+v, want succeeded on its own", label, got)
		}
	}
	stubbed := map[string]bool{}
	for _, s := range rec.Steps {
		stubbed[s.Name] = s.Stubbed
	}
	if want := map[string]bool{"first": false, "train": true, "each": true, "after": false}; fmt.Sprint(stubbed) != fmt.Sprint(want) {
		t.Errorf("run.json's steps stubbed: %v, want %v", stubbed, want)
	}
	for _, want := range []string{
		"stubbed, their programs not run (a rehearsal, not a real run): train, each",
		"train: stubbed: its program did not run",
		"each[1]: stubbed: its program did not run",
		"run r1 succeeded in ",
		"; a rehearsal: train, each stubbed",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}

	// The live view shows the stubbed steps so.
	live := runPlan(t, t.Context(), compileFlow(t, missingFlow(t.TempDir()), nil), local.Options{Root: root, RunID: "live", Stub: []string{"train", "each"}, Live: true, Width: 100, Height: 20})
	if live.err != nil {
		t.Fatal(live.err)
	}
	drawings := strings.Split(live.stdout, "\x1b[J")
	last := drawings[len(drawings)-1]
	for _, row := range []string{`(?m)^  train +stubbed `, `(?m)^  each +stubbed `, `(?m)^  after +succeeded `} {
		if !regexp.MustCompile(row).MatchString(last) {
			t.Errorf("the last drawing lacks a row matching %s:\n%s", row, last)
		}
	}

	// Resumed with train for real (here a program of that name, in the step's
	// PATH): train runs, and after with it; first does not run again, and each
	// stays stubbed.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "manifold-test-no-such-program"), []byte("#!/bin/sh\necho trained\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	again := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "r1", Stub: []string{"each"}})
	if again.err != nil {
		t.Fatalf("resumed run: %v\n%s", again.err, again.stdout)
	}
	_, tasks = again.tasks(t)
	if got := tasks["train"]; got.State != record.Succeeded || got.Stubbed || got.Attempts != 1 {
		t.Errorf("resumed train: %+v, want run for real", got)
	}
	if got := readFile(t, counts, "after"); got != "x\nx\n" {
		t.Errorf("after ran %d times, want 2 (again after the real train)", strings.Count(got, "x"))
	}
	if got := readFile(t, counts, "first"); got != "x\n" {
		t.Errorf("first ran %d times, want once", strings.Count(got, "x"))
	}
	if !strings.Contains(again.stdout, "train (stubbed then)") {
		t.Errorf("the resume does not say train runs again as it was stubbed:\n%s", again.stdout)
	}
}

// TestMissingProgramOfAnItem: a foreach step whose program is named by its
// item is refused when an item names a program this machine lacks.
func TestMissingProgramOfAnItem(t *testing.T) {
	flow := sdk.NewFlow("itemflow", sdk.Image("registry.example.com/item:v1")).
		Step("fan", sdk.Foreach("true", "manifold-test-no-such-item-program"), sdk.Command("$(MANIFOLD_ITEM)"))
	r := runFlow(t, t.Context(), flow, local.Options{})
	want := `steps[fan].command[0]: Not found: "manifold-test-no-such-item-program": not found in PATH`
	if !strings.Contains(fmt.Sprint(r.err), want) || r.res != nil {
		t.Errorf("run: %v (result %+v), want an error with %q", r.err, r.res, want)
	}
}
