package local_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// countCmd is a shell command that adds a line to $COUNTS/name.
func countCmd(name string) string { return fmt.Sprintf(`echo x >> "$COUNTS/%s"`, name) }

// times is how many times the step counted as name ran.
func times(t *testing.T, dir, name string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(data), "x")
}

// TestResumeAfterChange: a run resumed after a step's spec changed runs again
// that step, though it succeeded, and the step that waits for it; it says
// which step changed, and keeps the unchanged step that succeeded.
func TestResumeAfterChange(t *testing.T) {
	counts := t.TempDir()
	broken := filepath.Join(counts, "broken")
	if err := os.WriteFile(broken, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	flow := func(version string) *sdk.Flow {
		return sdk.NewFlow("changing", sdk.Image("registry.example.com/changing:v1"), sdk.Env("COUNTS", counts), sdk.Env("BROKEN", broken)).
			Step("prep", sdk.Command("sh", "-c", countCmd("prep")+"; echo "+version+" > \"$MANIFOLD_ARTIFACTS/version\"")).
			Step("side", sdk.Command("sh", "-c", countCmd("side"))).
			Step("use", sdk.After("prep"), sdk.Command("sh", "-c", countCmd("use")+`; [ ! -e "$BROKEN" ]`))
	}
	root := t.TempDir()
	first := runPlan(t, t.Context(), compileFlow(t, flow("v1"), nil), local.Options{Root: root})
	if first.err == nil || !strings.HasPrefix(first.err.Error(), "step use failed") {
		t.Fatalf("first run: %v", first.err)
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	second := runPlan(t, t.Context(), compileFlow(t, flow("v2"), nil), local.Options{Root: root, RunID: first.res.ID})
	if second.err != nil {
		t.Fatalf("resumed run: %v\n%s", second.err, second.stdout)
	}
	for name, want := range map[string]int{"prep": 2, "side": 1, "use": 2} {
		if got := times(t, counts, name); got != want {
			t.Errorf("%s ran %d times, want %d", name, got, want)
		}
	}
	if v := readFile(t, root, first.res.ID, "prep", "version"); v != "v2\n" {
		t.Errorf("prep's artifact holds %q; want the changed step's, v2", v)
	}
	if !strings.Contains(second.stdout, "changed since run "+first.res.ID+" was recorded: prep (spec)") {
		t.Errorf("the resumed run does not say that prep changed:\n%s", second.stdout)
	}
	if !strings.Contains(second.stdout, "side: succeeded in an earlier attempt of this run: not run again") {
		t.Errorf("the unchanged step side was run again:\n%s", second.stdout)
	}
}

// rebuiltFlow's Run step and its Command step (which runs without the
// program) count their runs in the run directory.
var rebuiltFlow = sdk.NewFlow("rebuilt", sdk.Image("registry.example.com/rebuilt:v1")).
	Step("body", sdk.Run(func(ctx *sdk.Context) error {
		f, err := os.OpenFile(filepath.Join(os.Getenv("MANIFOLD_RUN_DIR"), "body.count"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.WriteString(f, "x\n")
		return err
	})).
	Step("cmd", sdk.Command("sh", "-c", `echo x >> "$MANIFOLD_RUN_DIR/cmd.count"`))

func init() { programs["rebuilt"] = rebuiltFlow }

// TestResumeAfterRebuild: a run resumed by another build of the flow program
// runs its Run step again (its body is the program's) and not its Command
// step, and says why; the same build runs neither again.
func TestResumeAfterRebuild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// Two builds of the program: the second's bytes differ.
	dir := t.TempDir()
	builds := []string{filepath.Join(dir, "v1"), filepath.Join(dir, "v2")}
	if err := os.WriteFile(builds[0], data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(builds[1], append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	p := compileFlow(t, rebuiltFlow, nil)
	run := func(program, id string) (*local.Result, string) {
		t.Helper()
		var out strings.Builder
		res, err := local.Run(t.Context(), p, local.Options{Root: root, RunID: id, Program: program, Arg0: "rebuilt", Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("run with %s: %v\n%s", program, err, out.String())
		}
		return res, out.String()
	}
	res, _ := run(builds[0], "")
	counts := filepath.Join(root, res.ID)
	run(builds[0], res.ID)
	if b, c := times(t, counts, "body.count"), times(t, counts, "cmd.count"); b != 1 || c != 1 {
		t.Errorf("resumed by the same build: body ran %d times, cmd %d; want once each", b, c)
	}
	_, out := run(builds[1], res.ID)
	if b, c := times(t, counts, "body.count"), times(t, counts, "cmd.count"); b != 2 || c != 1 {
		t.Errorf("resumed by another build: body ran %d times, cmd %d; want 2 and 1", b, c)
	}
	if !strings.Contains(out, "body (program build)") {
		t.Errorf("the resumed run does not say that body's build changed:\n%s", out)
	}
	_, tasks, err := record.Read(root, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if task.State != record.Succeeded {
			t.Errorf("%s: %+v", task.Label(), task)
		}
	}
}
