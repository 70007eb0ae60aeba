package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/proctest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// Flows with Run steps. The runner starts Run steps as `<program> step NAME`; here
// the program is this test binary, started under the flow's name, and TestMain
// turns it into that flow's program.
var programs = map[string]*sdk.Flow{
	"flaky":  flakyFlow,
	"writer": writerFlow,
}

func TestMain(m *testing.M) {
	if flow, ok := programs[filepath.Base(os.Args[0])]; ok {
		cli.Main(flow)
	}
	os.Exit(m.Run())
}

// flakyFlow's step fails on its first attempt and succeeds on the second.
var flakyFlow = sdk.NewFlow("flaky", sdk.Image("registry.example.com/flaky:v1")).
	Step("wobble", sdk.Run(func(ctx *sdk.Context) error {
		var tries int
		_ = ctx.Get("wobble", "tries", &tries)
		tries++
		if err := ctx.Put("tries", tries); err != nil {
			return err
		}
		fmt.Printf("attempt %d\n", tries)
		if tries == 1 {
			return errors.New("first attempts always fail")
		}
		return nil
	}), sdk.Retry(2))

// writerFlow's put step rewrites a large artifact without end, paying no attention
// to its context, so that only SIGKILL stops it, likely in the middle of a write.
// Its shell step leaves a grandchild behind; last never starts.
var writerFlow = sdk.NewFlow("writer", sdk.Image("registry.example.com/writer:v1")).
	Step("put", sdk.Run(func(ctx *sdk.Context) error {
		big := strings.Repeat("manifold ", 1<<18)
		for i := 0; ; i++ {
			if err := ctx.Put("big", map[string]any{"round": i, "data": big}); err != nil {
				return err
			}
		}
	})).
	Step("shell", sdk.Command("sh", "-c", `sleep 300 & echo $! > "$MANIFOLD_ARTIFACTS/child"; echo $$$$ > "$MANIFOLD_ARTIFACTS/shell"; wait`)).
	Step("last", sdk.Command("true"), sdk.After("put", "shell"))

// run compiles flow and runs it under a fresh root.
type run struct {
	res            *local.Result
	err            error
	root           string
	stdout, stderr string
}

func runFlow(t *testing.T, ctx context.Context, flow *sdk.Flow, o local.Options) run {
	t.Helper()
	p := compileFlow(t, flow, nil)
	return runPlan(t, ctx, p, o)
}

func compileFlow(t testing.TB, flow *sdk.Flow, params map[string]string) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(flow, compile.Options{Params: params})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	return p
}

func runPlan(t *testing.T, ctx context.Context, p *plan.Flow, o local.Options) run {
	t.Helper()
	if o.Root == "" {
		o.Root = t.TempDir()
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o.Program, o.Arg0 = exe, p.Name
	if o.KillGrace == 0 {
		o.KillGrace = 500 * time.Millisecond
	}
	if o.MaxParallel == 0 {
		o.MaxParallel = 4
	}
	var stdout, stderr bytes.Buffer
	o.Stdout, o.Stderr = &stdout, &stderr
	res, err := local.Run(ctx, p, o)
	return run{res: res, err: err, root: o.Root, stdout: stdout.String(), stderr: stderr.String()}
}

// tasks reads the run's state back, by label.
func (r run) tasks(t *testing.T) (*record.Record, map[string]record.Task) {
	t.Helper()
	if r.res == nil {
		t.Fatalf("no result: %v", r.err)
	}
	rec, tasks, err := record.Read(r.root, r.res.ID)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]record.Task{}
	for _, task := range tasks {
		m[task.Label()] = task
	}
	return rec, m
}

func (r run) artifactDir(step string, index int) string {
	return sdk.ArtifactDir(r.res.Dir, step, index)
}

func readFile(t *testing.T, path ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestEnvironment(t *testing.T) {
	// The runner's own values of the variables it sets never reach a step.
	t.Setenv("MANIFOLD_ITEM", "inherited")
	t.Setenv("MANIFOLD_PARAM_STALE", "inherited")
	t.Setenv("KEEP_ME", "kept")
	flow := sdk.NewFlow("envflow", sdk.Image("registry.example.com/env:v1"), sdk.Param("who", "world")).
		Step("once", sdk.Env("GREETING", "hi $(MANIFOLD_PARAM_WHO) $(UNKNOWN) $$(MANIFOLD_PARAM_WHO)"),
			sdk.Command("sh", "-c", `env | grep -E '^(MANIFOLD_(PARAM_|ITEM|INDEX|RUN_DIR|ARTIFACTS)|GREETING=|KEEP_ME=)' | sort > "$MANIFOLD_ARTIFACTS/env.txt"; printf '%s\n' "$1"`, "sh", "argv $(MANIFOLD_PARAM_WHO) $(GREETING)")).
		Step("each", sdk.Foreach("x", "y"), sdk.After("once"),
			sdk.Command("sh", "-c", `env | grep -E '^MANIFOLD_(PARAM_|ITEM|INDEX|RUN_DIR|ARTIFACTS)' | sort > "$MANIFOLD_ARTIFACTS/env.txt"`))
	r := runFlow(t, t.Context(), flow, local.Options{})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	dir := r.res.Dir
	want := strings.Join([]string{
		"GREETING=hi world $(UNKNOWN) $(MANIFOLD_PARAM_WHO)",
		"KEEP_ME=kept",
		"MANIFOLD_ARTIFACTS=" + filepath.Join(dir, "once"),
		"MANIFOLD_PARAM_WHO=world",
		"MANIFOLD_RUN_DIR=" + dir,
	}, "\n") + "\n"
	if diff := cmp.Diff(want, readFile(t, dir, "once", "env.txt")); diff != "" {
		t.Errorf("environment of once (-want +got):\n%s", diff)
	}
	want = strings.Join([]string{
		"MANIFOLD_ARTIFACTS=" + filepath.Join(dir, "each", "1"),
		"MANIFOLD_INDEX=1",
		"MANIFOLD_ITEM=y",
		"MANIFOLD_PARAM_WHO=world",
		"MANIFOLD_RUN_DIR=" + dir,
	}, "\n") + "\n"
	if diff := cmp.Diff(want, readFile(t, dir, "each", "1", "env.txt")); diff != "" {
		t.Errorf("environment of each[1] (-want +got):\n%s", diff)
	}
	// $(NAME) in the command is expanded from the step's environment, as the
	// kubelet does: the step's variables, themselves expanded in order.
	if got := readFile(t, record.StateDir(dir, "once", -1), record.StdoutLog); got != "argv world hi world $(UNKNOWN) $(MANIFOLD_PARAM_WHO)\n" {
		t.Errorf("stdout.log of once = %q", got)
	}
}

// TestArtifactStoreStaysOnClusters: a flow with an artifact store for clusters
// keeps its artifacts in the run directory here, its steps get no store variables
// (neither the flow's nor the runner's own), and the run says so once.
func TestArtifactStoreStaysOnClusters(t *testing.T) {
	t.Setenv("MANIFOLD_ARTIFACT_STORE", "s3://inherited")
	t.Setenv("MANIFOLD_RUN_ID", "inherited")
	t.Setenv("MANIFOLD_S3_ENDPOINT", "http://inherited")
	flow := sdk.NewFlow("storeflow", sdk.Image("registry.example.com/store:v1")).
		Step("once", sdk.Command("sh", "-c", `env | grep -E '^MANIFOLD_(ARTIFACT|RUN_|S3_)' | sort > "$MANIFOLD_ARTIFACTS/env.txt"`))
	p, errs := compile.Compile(flow, compile.Options{Artifacts: "s3://ml-artifacts/flows", ArtifactsEndpoint: "http://minio:9000"})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	r := runPlan(t, t.Context(), p, local.Options{})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	dir := r.res.Dir
	want := "MANIFOLD_ARTIFACTS=" + filepath.Join(dir, "once") + "\nMANIFOLD_RUN_DIR=" + dir + "\n"
	if diff := cmp.Diff(want, readFile(t, dir, "once", "env.txt")); diff != "" {
		t.Errorf("environment of once (-want +got):\n%s", diff)
	}
	if note := "artifacts are kept in the run directory here; the artifact store (s3://ml-artifacts/flows) is for runs on a cluster"; strings.Count(r.stdout, note) != 1 {
		t.Errorf("the run does not say once that the store is for clusters:\n%s", r.stdout)
	}
}

// TestEFAWiringStaysOnClusters: a wired EFA step runs here without its wiring
// (no EFA device here for FI_PROVIDER=efa, and this machine's PATH, not the
// image's), but with its own variables.
func TestEFAWiringStaysOnClusters(t *testing.T) {
	t.Setenv("FI_PROVIDER", "")
	flow := sdk.NewFlow("wiredflow", sdk.Image("registry.example.com/wired:v1")).
		Step("train", sdk.EFA(1), sdk.EFAWiring(), sdk.Env("NCCL_DEBUG", "INFO"),
			sdk.Command("sh", "-c", `env | grep -E '^(FI_|NCCL_|CCOM_)' | sort > "$MANIFOLD_ARTIFACTS/env.txt"; test "$PATH" = "$1"`, "sh", os.Getenv("PATH")))
	r := runFlow(t, t.Context(), flow, local.Options{})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	if diff := cmp.Diff("FI_PROVIDER=\nNCCL_DEBUG=INFO\n", readFile(t, r.res.Dir, "train", "env.txt")); diff != "" {
		t.Errorf("environment of train (-want +got):\n%s", diff)
	}
}

// TestFailure: a failing step stops what waits for it, an independent branch
// finishes, and the error names the step, its exit status and its last words.
func TestFailure(t *testing.T) {
	flow := sdk.NewFlow("failflow", sdk.Image("registry.example.com/fail:v1")).
		Step("bad", sdk.Command("sh", "-c", "echo working; echo 'disk full' >&2; exit 3")).
		Step("after-bad", sdk.After("bad"), sdk.Command("sh", "-c", `touch "$MANIFOLD_ARTIFACTS/ran"`)).
		Step("after-that", sdk.After("after-bad"), sdk.Command("true")).
		Step("good", sdk.Command("sh", "-c", `sleep 0.2; touch "$MANIFOLD_ARTIFACTS/ran"`)).
		Step("after-good", sdk.After("good"), sdk.Command("sh", "-c", `touch "$MANIFOLD_ARTIFACTS/ran"`))
	r := runFlow(t, t.Context(), flow, local.Options{})
	if r.err == nil {
		t.Fatal("run of a failing step succeeded")
	}
	wantErr := regexp.MustCompile(`^step bad failed: exit status 3: disk full \(log: .*/_steps/bad/stderr\.log\); not started: after-bad, after-that$`)
	if !wantErr.MatchString(r.err.Error()) {
		t.Errorf("error %q, want it to match %s", r.err, wantErr)
	}
	if r.res.State != record.Failed || len(r.res.Failed) != 1 || r.res.Failed[0].Step != "bad" {
		t.Errorf("result %+v", r.res)
	}
	rec, tasks := r.tasks(t)
	if rec.State != record.Failed {
		t.Errorf("run.json state %s, want failed", rec.State)
	}
	bad := tasks["bad"]
	if bad.State != record.Failed || bad.ExitCode == nil || *bad.ExitCode != 3 || bad.Attempts != 1 {
		t.Errorf("bad: %+v", bad)
	}
	for _, name := range []string{"after-bad", "after-that"} {
		if tasks[name].State != record.Skipped || tasks[name].Attempts != 0 {
			t.Errorf("%s: %+v, want skipped without attempts", name, tasks[name])
		}
	}
	if _, err := os.Stat(filepath.Join(r.artifactDir("after-bad", -1), "ran")); err == nil {
		t.Error("after-bad ran after bad failed")
	}
	for _, name := range []string{"good", "after-good"} {
		if tasks[name].State != record.Succeeded {
			t.Errorf("%s: %+v, want succeeded", name, tasks[name])
		}
		readFile(t, r.artifactDir(name, -1), "ran")
	}
	if got := readFile(t, record.StateDir(r.res.Dir, "bad", -1), record.StderrLog); got != "disk full\n" {
		t.Errorf("stderr.log of bad = %q", got)
	}
	for _, want := range []string{"bad: failed after 1 attempt: exit status 3: disk full", "after-bad: not started: bad failed", "after-that: not started: after-bad skipped"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "bad        | disk full\n") {
		t.Errorf("stderr lacks the step's prefixed line:\n%s", r.stderr)
	}
}

func TestRetrySucceedsOnSecondAttempt(t *testing.T) {
	flow := sdk.NewFlow("retryflow", sdk.Image("registry.example.com/retry:v1")).
		Step("shaky", sdk.Retry(3), sdk.RetryBackoff(10*time.Millisecond), sdk.Command("sh", "-c",
			`if [ -e "$MANIFOLD_ARTIFACTS/tried" ]; then echo second; echo again >&2; exit 0; fi; touch "$MANIFOLD_ARTIFACTS/tried"; echo first >&2; exit 1`))
	r := runFlow(t, t.Context(), flow, local.Options{})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	_, tasks := r.tasks(t)
	if got := tasks["shaky"]; got.State != record.Succeeded || got.Attempts != 2 || *got.ExitCode != 0 || got.Error != "" {
		t.Errorf("shaky: %+v, want succeeded on attempt 2", got)
	}
	// A retry's output starts with a line that names its attempt, also in a log
	// the first attempt left empty.
	if log := readFile(t, record.StateDir(r.res.Dir, "shaky", -1), record.StderrLog); !regexp.MustCompile(`\Afirst\n--- attempt 2, \S+ ---\nagain\n\z`).MatchString(log) {
		t.Errorf("stderr.log = %q, want both attempts", log)
	}
	if log := readFile(t, record.StateDir(r.res.Dir, "shaky", -1), record.StdoutLog); !regexp.MustCompile(`\A--- attempt 2, \S+ ---\nsecond\n\z`).MatchString(log) {
		t.Errorf("stdout.log = %q, want attempt 2's output", log)
	}
	for _, want := range []string{"shaky: attempt 1 failed: exit status 1: first; retrying in 10ms", "shaky: attempt 2 of 4 started", "shaky: succeeded"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}

// TestRetryRunStep retries a Run step, which runs through the flow program.
func TestRetryRunStep(t *testing.T) {
	r := runFlow(t, t.Context(), flakyFlow, local.Options{})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stdout)
	}
	_, tasks := r.tasks(t)
	if got := tasks["wobble"]; got.State != record.Succeeded || got.Attempts != 2 {
		t.Errorf("wobble: %+v", got)
	}
	if got := readFile(t, r.artifactDir("wobble", -1), "tries.json"); got != "2\n" {
		t.Errorf("tries = %q", got)
	}
	if !strings.Contains(r.stderr, "wobble | error: step wobble: first attempts always fail") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
}

func TestRetriesRunOut(t *testing.T) {
	flow := sdk.NewFlow("hopeless", sdk.Image("registry.example.com/retry:v1")).
		Step("never", sdk.Retry(2), sdk.Command("sh", "-c", `echo x >> "$MANIFOLD_ARTIFACTS/tries"; exit 7`))
	r := runFlow(t, t.Context(), flow, local.Options{})
	if r.err == nil || !strings.HasPrefix(r.err.Error(), "step never failed: exit status 7") {
		t.Fatalf("error %v", r.err)
	}
	_, tasks := r.tasks(t)
	if got := tasks["never"]; got.State != record.Failed || got.Attempts != 3 {
		t.Errorf("never: %+v, want failed after 3 attempts", got)
	}
	if got := readFile(t, r.artifactDir("never", -1), "tries"); got != "x\nx\nx\n" {
		t.Errorf("tries = %q", got)
	}
}

// TestTimeout: a step over its timeout is stopped with its whole process group,
// grandchildren included; one that ignores SIGTERM is killed after the grace.
func TestTimeout(t *testing.T) {
	for _, tt := range []struct{ name, trap string }{
		{"term", ""},
		{"ignores-term", `trap "" TERM; `},
	} {
		t.Run(tt.name, func(t *testing.T) {
			flow := sdk.NewFlow("slow", sdk.Image("registry.example.com/slow:v1")).
				Step("sleepy", sdk.Timeout(time.Second), sdk.Command("sh", "-c",
					tt.trap+`sleep 300 & echo $! > "$MANIFOLD_ARTIFACTS/child"; echo $$$$ > "$MANIFOLD_ARTIFACTS/shell"; wait; wait`))
			r := runFlow(t, t.Context(), flow, local.Options{KillGrace: 200 * time.Millisecond})
			if r.err == nil || !strings.HasPrefix(r.err.Error(), "step sleepy failed: timed out after 1s") {
				t.Fatalf("error %v", r.err)
			}
			_, tasks := r.tasks(t)
			if got := tasks["sleepy"]; got.State != record.Failed || got.ExitCode == nil || *got.ExitCode != -1 {
				t.Errorf("sleepy: %+v, want failed by a signal", got)
			}
			for _, name := range []string{"shell", "child"} {
				waitGone(t, name, pidIn(t, r.artifactDir("sleepy", -1), name))
			}
		})
	}
}

func pidIn(t *testing.T, dir, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(readFile(t, dir, name)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGone waits for process pid to end, and kills it if it does not.
func waitGone(t *testing.T, what string, pid int) {
	t.Helper()
	if err := proctest.WaitGone(pid, 10*time.Second); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("%s: %v", what, err)
	}
}

// TestResume runs a flow whose item b fails, then resumes the run: only b and
// what waits for it run again.
func TestResume(t *testing.T) {
	counts := t.TempDir()
	broken := filepath.Join(counts, "broken")
	if err := os.WriteFile(broken, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	count := func(name string) string {
		return fmt.Sprintf(`echo x >> "$COUNTS/%s"`, name)
	}
	flow := sdk.NewFlow("resumable", sdk.Image("registry.example.com/resume:v1"), sdk.Param("size", "1"),
		sdk.Env("COUNTS", counts), sdk.Env("BROKEN", broken)).
		Step("first", sdk.Command("sh", "-c", count("first"))).
		Step("each", sdk.After("first"), sdk.Foreach("a", "b", "c"), sdk.Command("sh", "-c",
			count("each-$MANIFOLD_ITEM")+`; if [ "$MANIFOLD_ITEM" = b ] && [ -e "$BROKEN" ]; then exit 1; fi`)).
		Step("last", sdk.After("each"), sdk.Command("sh", "-c", count("last")))
	root := t.TempDir()
	p := compileFlow(t, flow, nil)
	first := runPlan(t, t.Context(), p, local.Options{Root: root})
	if first.err == nil || !strings.HasPrefix(first.err.Error(), "step each[1] failed") {
		t.Fatalf("first run: %v", first.err)
	}
	id := first.res.ID
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}

	// Another flow, or other params, cannot resume the run.
	other := compileFlow(t, sdk.NewFlow("other", sdk.Image("registry.example.com/x:v1")).Step("x", sdk.Command("true")), nil)
	if r := runPlan(t, t.Context(), other, local.Options{Root: root, RunID: id}); r.err == nil || !strings.Contains(r.err.Error(), "belongs to flow resumable") || r.res != nil {
		t.Errorf("resuming with another flow: %v", r.err)
	}
	if r := runPlan(t, t.Context(), compileFlow(t, flow, map[string]string{"size": "2"}), local.Options{Root: root, RunID: id}); r.err == nil || !strings.Contains(r.err.Error(), "--param size=1, not 2") {
		t.Errorf("resuming with other params: %v", r.err)
	}

	second := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: id})
	if second.err != nil {
		t.Fatalf("resumed run: %v\n%s", second.err, second.stdout)
	}
	if second.res.ID != id {
		t.Errorf("resumed run has ID %s, want %s", second.res.ID, id)
	}
	runs := map[string]string{"first": "x\n", "each-a": "x\n", "each-b": "x\nx\n", "each-c": "x\n", "last": "x\n"}
	for name, want := range runs {
		if got := readFile(t, counts, name); got != want {
			t.Errorf("%s ran %d times, want %d", name, strings.Count(got, "x"), strings.Count(want, "x"))
		}
	}
	rec, tasks := second.tasks(t)
	if rec.State != record.Succeeded {
		t.Errorf("run state %s", rec.State)
	}
	for label, task := range tasks {
		if task.State != record.Succeeded {
			t.Errorf("%s: %+v", label, task)
		}
	}
	if !strings.Contains(second.stdout, "each[0]: succeeded in an earlier attempt of this run: not run again") {
		t.Errorf("output:\n%s", second.stdout)
	}
}

// TestInterrupt cancels a run while a step rewrites a large artifact and another
// has a grandchild: every process goes, no partial artifact stays, and the run is
// recorded as interrupted.
func TestInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := t.TempDir()
	done := make(chan run, 1)
	go func() {
		done <- runFlow(t, ctx, writerFlow, local.Options{Root: root, KillGrace: 300 * time.Millisecond})
	}()

	// Wait until both steps are under way: the artifact written, the child started.
	var runDir string
	deadline := time.Now().Add(20 * time.Second)
	for {
		dirs, _ := filepath.Glob(filepath.Join(root, "*", "shell", "child"))
		arts, _ := filepath.Glob(filepath.Join(root, "*", "put", "big.json"))
		if len(dirs) == 1 && len(arts) == 1 {
			runDir = filepath.Dir(filepath.Dir(dirs[0]))
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("steps did not start: %v", <-done)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	r := <-done
	if !errors.Is(r.err, local.ErrInterrupted) || r.res.State != record.Interrupted {
		t.Fatalf("run after cancel: %v, %+v", r.err, r.res)
	}
	rec, tasks := r.tasks(t)
	if rec.State != record.Interrupted || rec.End.IsZero() {
		t.Errorf("run.json: %+v", rec)
	}
	want := map[string]record.State{"put": record.Interrupted, "shell": record.Interrupted, "last": record.Pending}
	for name, state := range want {
		if tasks[name].State != state {
			t.Errorf("%s: %+v, want %s", name, tasks[name], state)
		}
	}
	for _, name := range []string{"shell", "child"} {
		waitGone(t, name, pidIn(t, filepath.Join(runDir, "shell"), name))
	}
	entries, err := os.ReadDir(filepath.Join(runDir, "put"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"big.json"}) {
		t.Errorf("put's artifact directory holds %q, want only big.json", names)
	}
	var big struct{ Round int }
	if err := json.Unmarshal([]byte(readFile(t, runDir, "put", "big.json")), &big); err != nil {
		t.Errorf("big.json is not whole: %v", err)
	}
	if !strings.Contains(r.stdout, "put: interrupted") || !strings.Contains(r.stdout, "interrupted in") {
		t.Errorf("output:\n%s", r.stdout)
	}
}

// TestMaxParallel: four independent steps, at most two at a time. Each waits until
// it sees a partner running, and records how many were running when it did (the
// same count it tested, so a partner leaving just after cannot change it). A step
// stays a second after it has seen its partner, so that the last step, which
// starts as one leaves, finds that one still there however slow the machine.
func TestMaxParallel(t *testing.T) {
	shared := t.TempDir()
	// $$$$ is the shell's $$: a command's $$ stands for $, as on Kubernetes.
	script := `mkdir -p "$SHARED/running"; touch "$SHARED/running/$$$$"
i=0; n=$(ls "$SHARED/running" | wc -l)
while [ $n -lt 2 ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); n=$(ls "$SHARED/running" | wc -l); done
echo $n > "$MANIFOLD_ARTIFACTS/seen"; sleep 1; rm "$SHARED/running/$$$$"`
	flow := sdk.NewFlow("wide", sdk.Image("registry.example.com/wide:v1"), sdk.Env("SHARED", shared)).
		Step("a", sdk.Command("sh", "-c", script)).
		Step("b", sdk.Command("sh", "-c", script)).
		Step("c", sdk.Command("sh", "-c", script)).
		Step("d", sdk.Command("sh", "-c", script))
	r := runFlow(t, t.Context(), flow, local.Options{MaxParallel: 2})
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, s := range []string{"a", "b", "c", "d"} {
		if got := strings.TrimSpace(readFile(t, r.artifactDir(s, -1), "seen")); got != "2" {
			t.Errorf("step %s saw %s steps running, want 2", s, got)
		}
	}
}

func TestIgnored(t *testing.T) {
	t.Setenv("TOKEN_SET", "x")
	flow := sdk.NewFlow("accel", sdk.Image("registry.example.com/accel:v1")).
		Step("train", sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Nodes(2),
			sdk.Command("sh", "-c", `env > "$MANIFOLD_ARTIFACTS/env"`)).
		Step("infer", sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1), sdk.Command("true")).
		Step("gpu", sdk.GPU(2), sdk.Resource("example.com/fpga", 1), sdk.Command("true"),
			sdk.SecretEnv("TOKEN", "creds", "token"), sdk.SecretEnv("TOKEN_SET", "creds", "other")).
		Step("plain", sdk.Command("true"))
	p := compileFlow(t, flow, nil)
	notes, refused := local.Ignored(p)
	wantNotes := []string{
		"train asks 16 Trainium devices and 8 EFA: ignored locally",
		"train asks 2 nodes: runs once, as a single node, locally",
		"infer asks 1 Inferentia2 device: ignored locally",
		"gpu asks 2 NVIDIA GPUs and 1 example.com/fpga: ignored locally",
		"gpu reads TOKEN (secret creds): secrets are not read locally; set the variables in this environment to pass them",
	}
	if diff := cmp.Diff(wantNotes, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	var paths []string
	for _, e := range refused {
		paths = append(paths, e.Field)
	}
	wantPaths := []string{"steps[train].trainium", "steps[train].efa", "steps[train].nodes", "steps[infer].inferentia", "steps[gpu].gpu", "steps[gpu].resources[example.com/fpga]"}
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("refused paths (-want +got):\n%s", diff)
	}

	// Reported once each, then ignored: every step runs.
	r := runPlan(t, t.Context(), p, local.Options{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, n := range wantNotes {
		if strings.Count(r.stdout, n) != 1 {
			t.Errorf("output has %q %d times, want once:\n%s", n, strings.Count(r.stdout, n), r.stdout)
		}
	}
	// The multi-node step ran as one node: no rendezvous variables.
	if env := readFile(t, r.artifactDir("train", -1), "env"); strings.Contains(env, "MASTER_ADDR") || strings.Contains(env, "MANIFOLD_NODE_RANK") {
		t.Errorf("a single local node got rendezvous variables:\n%s", env)
	}

	// Strict refuses them all before anything runs.
	root := filepath.Join(t.TempDir(), "runs")
	r = runPlan(t, t.Context(), p, local.Options{Root: root, Strict: true})
	var re *local.RefusedError
	if !errors.As(r.err, &re) || len(re.Problems) != len(wantPaths) || r.res != nil {
		t.Fatalf("strict run: %v", r.err)
	}
	if !strings.Contains(re.Error(), "steps[train].trainium: Forbidden: 16 Trainium devices: a local run has no accelerators") {
		t.Errorf("strict error:\n%s", re)
	}
	if _, err := os.Stat(root); err == nil {
		t.Error("a refused run made its run directory")
	}
}

// TestOutput checks both displays: plain timestamped lines, and the live view that
// redraws one line per step in place, no wider than the terminal.
func TestOutput(t *testing.T) {
	flow := sdk.NewFlow("show", sdk.Image("registry.example.com/show:v1")).
		Step("speak", sdk.Command("sh", "-c", "echo one; echo two >&2; printf 'no newline'")).
		Step("fan-out-with-a-long-name", sdk.After("speak"), sdk.Foreach("p", "q"), sdk.Command("sh", "-c", "echo item $MANIFOLD_ITEM"))
	p := compileFlow(t, flow, nil)

	plain := runPlan(t, t.Context(), p, local.Options{})
	if plain.err != nil {
		t.Fatal(plain.err)
	}
	stamp := `\d\d:\d\d:\d\d\.\d{3} `
	for _, line := range strings.Split(strings.TrimSuffix(plain.stdout+plain.stderr, "\n"), "\n") {
		if !regexp.MustCompile(`^` + stamp).MatchString(line) {
			t.Errorf("line without a timestamp: %q", line)
		}
	}
	for _, re := range []string{
		`(?m)^` + stamp + `speak                       \| one$`,
		`(?m)^` + stamp + `speak                       \| no newline$`,
		`(?m)^` + stamp + `fan-out-with-a-long-name\[1\] \| item q$`,
		`(?m)^` + stamp + `fan-out-with-a-long-name\[0\]: succeeded in `,
	} {
		if !regexp.MustCompile(re).MatchString(plain.stdout) {
			t.Errorf("stdout lacks %s:\n%s", re, plain.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^` + stamp + `speak +\| two$`).MatchString(plain.stderr) {
		t.Errorf("stderr lacks speak's line:\n%s", plain.stderr)
	}
	if got := readFile(t, record.StateDir(plain.res.Dir, "speak", -1), record.StdoutLog); got != "one\nno newline" {
		t.Errorf("stdout.log = %q: want what the step wrote, unchanged", got)
	}

	live := runPlan(t, t.Context(), p, local.Options{Live: true, Width: 50})
	if live.err != nil {
		t.Fatal(live.err)
	}
	if !strings.Contains(live.stdout, "\x1b[") {
		t.Errorf("live output never moves the cursor:\n%q", live.stdout)
	}
	// What stays on the screen: the last drawing of the view, then the summary.
	last := live.stdout[strings.LastIndex(live.stdout, "\x1b[J")+len("\x1b[J"):]
	lines := strings.Split(strings.TrimSuffix(last, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("final view %q, want the run, two steps and the summary", lines)
	}
	if !strings.HasPrefix(lines[0], "run "+live.res.ID[:20]) || !regexp.MustCompile(`^  speak +succeeded +\S+$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^  fan-out-with-a-long-na`).MatchString(lines[2]) || !strings.HasPrefix(lines[3], "run "+live.res.ID+" succeeded in ") {
		t.Errorf("final view:\n%s", strings.Join(lines, "\n"))
	}
	for _, l := range lines[:3] {
		if len([]rune(l)) > 49 {
			t.Errorf("view line %q is wider than the terminal", l)
		}
	}
	if !strings.Contains(live.stdout, "speak                       | one\n") || strings.Contains(live.stdout, "speak: started") {
		t.Errorf("live output:\n%s", live.stdout)
	}
}

func TestListAndRead(t *testing.T) {
	root := t.TempDir()
	flow := sdk.NewFlow("listed", sdk.Image("registry.example.com/list:v1")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.After("a"), sdk.Foreach("x", "y"), sdk.Command("true"))
	p := compileFlow(t, flow, nil)
	first := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "aaa"})
	second := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "bbb"})
	if first.err != nil || second.err != nil {
		t.Fatal(first.err, second.err)
	}
	// A run recorded as running without a runner holding its lock was abandoned;
	// it started last, so it is listed last.
	abandoned := filepath.Join(root, "ccc")
	if err := os.MkdirAll(abandoned, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(abandoned, "run.json"), []byte(`{"flow":"listed","id":"ccc","state":"running","start":"`+time.Now().UTC().Format(time.RFC3339Nano)+`","steps":[{"name":"a"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	runs, err := record.List(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.ID+" "+string(r.State))
	}
	if diff := cmp.Diff([]string{"aaa succeeded", "bbb succeeded", "ccc abandoned"}, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	rec, tasks, err := record.Read(root, "bbb")
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, task := range tasks {
		labels = append(labels, task.Label()+"="+task.Item+" "+string(task.State))
	}
	if diff := cmp.Diff([]string{"a= succeeded", "b[0]=x succeeded", "b[1]=y succeeded"}, labels); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if rec.Flow != "listed" || len(rec.Steps) != 2 || rec.Steps[1].Items != 2 || rec.End.Before(rec.Start) {
		t.Errorf("record %+v", rec)
	}
}

// TestBusy: a run that a runner holds cannot be resumed by another.
func TestBusy(t *testing.T) {
	root := t.TempDir()
	flow := sdk.NewFlow("busy", sdk.Image("registry.example.com/busy:v1")).Step("a", sdk.Command("true"))
	p := compileFlow(t, flow, nil)
	if r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "held"}); r.err != nil {
		t.Fatal(r.err)
	}
	f, err := os.Open(filepath.Join(root, "held", ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "held"})
	if r.err == nil || !strings.Contains(r.err.Error(), "run held is in progress in another process") {
		t.Errorf("second runner: %v", r.err)
	}
	if runs, _ := record.List(root); len(runs) != 1 || runs[0].State != record.Succeeded {
		t.Errorf("runs: %+v", runs)
	}
}

// TestBackgroundContext runs with a context that can never end, as cli.Run's
// callers may pass.
func TestBackgroundContext(t *testing.T) {
	flow := sdk.NewFlow("calm", sdk.Image("registry.example.com/calm:v1")).
		Step("a", sdk.Command("sh", "-c", `touch "$MANIFOLD_ARTIFACTS/ran"`))
	r := runFlow(t, context.Background(), flow, local.Options{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	readFile(t, r.artifactDir("a", -1), "ran")
}

// TestLiveViewHeight: with more steps than the terminal has lines, the view keeps
// to its height, showing the running step and counting the others.
func TestLiveViewHeight(t *testing.T) {
	flow := sdk.NewFlow("tall", sdk.Image("registry.example.com/tall:v1"))
	for i := range 12 {
		opts := []sdk.StepOption{sdk.Command("true")}
		if i > 0 {
			opts = append(opts, sdk.After(fmt.Sprintf("s%02d", i-1)))
		}
		flow.Step(fmt.Sprintf("s%02d", i), opts...)
	}
	r := runFlow(t, t.Context(), flow, local.Options{Live: true, Width: 80, Height: 6})
	if r.err != nil {
		t.Fatal(r.err)
	}
	// Each drawing follows a "clear to the end of the screen".
	blocks := strings.Split(r.stdout, "\x1b[J")[1:]
	if len(blocks) < 12 {
		t.Fatalf("%d drawings, want one at least per step start:\n%q", len(blocks), r.stdout)
	}
	sawRunning := false
	for _, b := range blocks {
		b = regexp.MustCompile(`\x1b\[\d+F$`).ReplaceAllString(b, "")
		lines := strings.Split(strings.TrimSuffix(b, "\n"), "\n")
		if strings.HasPrefix(lines[len(lines)-1], "run "+r.res.ID+" succeeded") {
			lines = lines[:len(lines)-1] // the summary, after the last drawing
		}
		if len(lines) > 5 {
			t.Errorf("a drawing of %d lines on a terminal of 6:\n%s", len(lines), b)
		}
		if regexp.MustCompile(`(?m)^  s\d\d +running`).MatchString(b) && regexp.MustCompile(`(?m)^  \d+ more +\d+ (pending|succeeded)`).MatchString(b) {
			sawRunning = true
		}
	}
	if !sawRunning {
		t.Errorf("no drawing shows the running step and counts the rest:\n%s", r.stdout)
	}
	last := blocks[len(blocks)-1]
	if !strings.Contains(last, "  12 more  12 succeeded\n") {
		t.Errorf("last drawing:\n%s", last)
	}
}

// TestSecretsStayOutOfTheRecord: a Secret's value read from this environment
// (sdk.SecretEnv) reaches the step, and a plain value that looks like a
// credential too, but neither reaches the run's files (run.json, state.json,
// the logs) nor what the runner prints, even when the step prints them.
func TestSecretsStayOutOfTheRecord(t *testing.T) {
	const secret = "q8Zr3kX/7vLm2+Pw9TnB4yHc6JdF1sGa0eUoRiWx"
	const plain = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
	t.Setenv("API_TOKEN", secret)
	flow := sdk.NewFlow("creds", sdk.Image("registry.example.com/creds:v1")).
		Step("leak", sdk.SecretEnv("API_TOKEN", "api", "token"), sdk.Env("HF_TOKEN", plain),
			sdk.Command("sh", "-c", `echo "len ${#API_TOKEN}"; echo "token $API_TOKEN"; echo "hf $HF_TOKEN" >&2; echo "failing with $API_TOKEN" >&2; exit 3`))
	r := runFlow(t, context.Background(), flow, local.Options{})
	if r.err == nil {
		t.Fatal("the step exits 3, and the run succeeded")
	}
	for _, out := range []string{r.stdout, r.stderr, r.err.Error()} {
		if strings.Contains(out, secret) || strings.Contains(out, plain) {
			t.Errorf("the runner printed a secret:\n%s", out)
		}
	}
	var files int
	err := filepath.WalkDir(r.root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		if bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte(plain)) {
			t.Errorf("%s holds a secret:\n%s", path, data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("the run wrote no files")
	}
	_, tasks, err := record.Read(r.root, r.res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || !strings.Contains(tasks[0].Error, "failing with ***") {
		t.Errorf("recorded error: %+v, want the step's last line, masked", tasks)
	}
	dir := record.StateDir(filepath.Join(r.root, r.res.ID), "leak", -1)
	stdout, err := os.ReadFile(filepath.Join(dir, record.StdoutLog))
	if err != nil {
		t.Fatal(err)
	}
	// The step got the value: 40 characters.
	if want := "len 40\ntoken ***\n"; string(stdout) != want {
		t.Errorf("stdout.log = %q, want %q", stdout, want)
	}
	stderr, err := os.ReadFile(filepath.Join(dir, record.StderrLog))
	if err != nil {
		t.Fatal(err)
	}
	if want := "hf ***\nfailing with ***\n"; string(stderr) != want {
		t.Errorf("stderr.log = %q, want %q", stderr, want)
	}
}

// TestCredentialInAnErrorWithheld: a step's last line, which the record and
// the runner's error quote, is withheld where it looks like a credential that
// the step made itself, as every output withholds one (credential.Redact).
func TestCredentialInAnErrorWithheld(t *testing.T) {
	flow := sdk.NewFlow("creds", sdk.Image("registry.example.com/creds:v1")).
		Step("fetch", sdk.Command("sh", "-c", `p=made; echo "GET https://reader:pw-$p-42@db.example.com/x: 403" >&2; exit 3`))
	r := runFlow(t, context.Background(), flow, local.Options{})
	if r.err == nil {
		t.Fatal("the step exits 3, and the run succeeded")
	}
	_, tasks, err := record.Read(r.root, r.res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || !strings.Contains(tasks[0].Error, "https://reader:xxxxx@db.example.com/x: 403") {
		t.Errorf("recorded error: %+v, want the step's last line, its password withheld", tasks)
	}
	if strings.Contains(r.err.Error(), "pw-made-42") || strings.Contains(r.stderr, "pw-made-42: 403") {
		t.Errorf("the runner's error or output holds the password: %v\n%s", r.err, r.stderr)
	}
}
