package flowtest_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/flowtest"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	os.RemoveAll(exampleRoot)
	os.Exit(code)
}

// image is every test flow's: a flow without one does not compile.
var image = sdk.Image("registry.example.com/ml/flow:v1")

var errDiverged = errors.New("loss diverged")

// diamond is start → left, right → join; right fails.
func diamond() *sdk.Flow {
	return sdk.NewFlow("diamond", image).
		Step("start", sdk.Run(func(ctx *sdk.Context) error { return ctx.Put("n", 1) })).
		Step("left", sdk.Run(func(ctx *sdk.Context) error { return ctx.Put("n", 2) }), sdk.After("start")).
		Step("right", sdk.Run(func(ctx *sdk.Context) error { return fmt.Errorf("training: %w", errDiverged) }), sdk.After("start")).
		Step("join", sdk.Run(func(ctx *sdk.Context) error { return ctx.Put("n", 4) }), sdk.After("left", "right"))
}

func TestFailedStepStopsItsDependents(t *testing.T) {
	run := flowtest.Run(t, diamond())
	if run.Err() == nil {
		t.Fatal("the run succeeded; right fails")
	}
	if got, want := run.Err().Error(), "step right failed: training: loss diverged; not started: join"; got != want {
		t.Errorf("Err() = %q, want %q", got, want)
	}
	run.WantRan(t, "start", "left", "right")
	run.WantBefore(t, "start", "left", "right")
	run.WantFailed(t, "right", "loss diverged")
	run.WantSkipped(t, "join", "not started: right failed")
	if !errors.Is(run.StepErr("right"), errDiverged) {
		t.Errorf("StepErr(right) = %v, want it to wrap errDiverged", run.StepErr("right"))
	}
	if got := flowtest.Artifact[int](t, run, "left", "n"); got != 2 {
		t.Errorf("left's n = %d, want 2", got)
	}

	// The run directory is a local run's: what the runs command reads.
	rec, tasks, err := record.Read(filepath.Dir(run.Dir()), flowtest.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Flow != "diamond" || rec.State != record.Failed || rec.Error != run.Err().Error() {
		t.Errorf("run.json: flow %q, state %q, error %q", rec.Flow, rec.State, rec.Error)
	}
	var got []string
	for _, task := range tasks {
		got = append(got, fmt.Sprintf("%s %s %d", task.Label(), task.State, task.Attempts))
	}
	want := []string{"start succeeded 1", "left succeeded 1", "right failed 1", "join skipped 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded tasks (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(run.Dir(), "left", "n.json")); err != nil {
		t.Errorf("left's artifact is not where a local run keeps it: %v", err)
	}
}

func TestRetryBacksOffOnTheFakeClock(t *testing.T) {
	flow := sdk.NewFlow("retry", image).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Retry(3), sdk.RetryBackoff(10*time.Minute)).
		Step("evaluate", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("train"))
	run := flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Takes(time.Hour), func(c *flowtest.Call) error {
		if c.Attempt < 3 {
			return &flowtest.ExitError{Code: 137}
		}
		return c.Put("model", "s3://models/train")
	}))
	run.WantSuccess(t)
	run.WantAttempts(t, "train", 3)
	run.WantAttempts(t, "evaluate", 1)
	// Three hours of training, and backoffs of 10m then 20m.
	if got, want := run.Elapsed(), 3*time.Hour+30*time.Minute; got != want {
		t.Errorf("Elapsed() = %s, want %s", got, want)
	}
	task, _ := run.Task("train")
	if got, want := task.End.Sub(task.Start), 3*time.Hour+30*time.Minute; got != want {
		t.Errorf("train took %s on the fake clock, want %s", got, want)
	}
	if task.ExitCode == nil || *task.ExitCode != 0 {
		t.Errorf("train's exit code = %v, want 0", task.ExitCode)
	}
	if got := flowtest.Artifact[string](t, run, "train", "model"); got != "s3://models/train" {
		t.Errorf("model = %q", got)
	}

	// Retries that run out fail the step with the last attempt's exit code.
	run = flowtest.Run(t, flow, flowtest.Set("train.retry=1"), flowtest.Stub("train", flowtest.Exit(2)))
	run.WantAttempts(t, "train", 2)
	run.WantFailed(t, "train", "exit status 2")
	run.WantSkipped(t, "evaluate", "train failed")
	if task, _ := run.Task("train"); task.ExitCode == nil || *task.ExitCode != 2 {
		t.Errorf("train's exit code = %v, want 2", task.ExitCode)
	}
	var exit *flowtest.ExitError
	if !errors.As(run.StepErr("train"), &exit) || exit.Code != 2 {
		t.Errorf("StepErr(train) = %v, want an ExitError of code 2", run.StepErr("train"))
	}
	if got, want := run.Elapsed(), 10*time.Minute; got != want {
		t.Errorf("Elapsed() = %s, want %s", got, want)
	}
}

func TestTimeoutFiresOnTheFakeClock(t *testing.T) {
	flow := sdk.NewFlow("timeout", image).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Timeout(6*time.Hour), sdk.Retry(1))
	var putAfter error
	run := flowtest.Run(t, flow, flowtest.Stub("train", func(c *flowtest.Call) error {
		if err := c.Take(7 * time.Hour); err == nil || err.Error() != "timed out after 6h0m0s" || c.Err() == nil {
			t.Errorf("Take past the timeout returned %v, and the attempt's context %v", err, c.Err())
		}
		putAfter = c.Put("model", "late")
		return nil
	}))
	run.WantFailed(t, "train", "timed out after 6h0m0s")
	run.WantAttempts(t, "train", 2)
	if got, want := run.Elapsed(), 12*time.Hour; got != want {
		t.Errorf("Elapsed() = %s, want %s", got, want)
	}
	if task, _ := run.Task("train"); task.ExitCode == nil || *task.ExitCode != -1 {
		t.Errorf("train's exit code = %v, want -1 (a signal)", task.ExitCode)
	}
	if putAfter == nil {
		t.Error("Put after the timeout succeeded")
	}
	if _, err := os.Stat(filepath.Join(run.Dir(), "train", "model.json")); err == nil {
		t.Error("an attempt that timed out left its artifact")
	}

	// Within the timeout (given with --set's syntax) it succeeds.
	run = flowtest.Run(t, flow, flowtest.Set("train.timeout=8h"), flowtest.Stub("train", flowtest.Takes(7*time.Hour)))
	run.WantSuccess(t)
	if got, want := run.Elapsed(), 7*time.Hour; got != want {
		t.Errorf("Elapsed() = %s, want %s", got, want)
	}
}

func foreachFlow() *sdk.Flow {
	return sdk.NewFlow("fan", image, sdk.Param("suffix", "!")).
		Step("process", sdk.Run(func(ctx *sdk.Context) error {
			return ctx.Put("out", fmt.Sprintf("%d:%s%s", ctx.Index(), ctx.Item(), ctx.Param("suffix")))
		}), sdk.Foreach("a", "b", "c"), sdk.Retry(1)).
		Step("join", sdk.Run(func(ctx *sdk.Context) error {
			var all []string
			for i := 0; ; i++ {
				var s string
				if err := ctx.GetIndex("process", i, "out", &s); err != nil {
					break
				}
				all = append(all, s)
			}
			return ctx.Put("all", strings.Join(all, " "))
		}), sdk.After("process"))
}

func TestForeachItems(t *testing.T) {
	run := flowtest.Run(t, foreachFlow(), flowtest.Params("suffix=?"))
	run.WantSuccess(t)
	if diff := cmp.Diff([]string{"process[0]", "process[1]", "process[2]", "join"}, run.Started()); diff != "" {
		t.Errorf("Started() (-want +got):\n%s", diff)
	}
	if got := flowtest.ItemArtifact[string](t, run, "process", 1, "out"); got != "1:b?" {
		t.Errorf("process[1]'s out = %q", got)
	}
	if got := flowtest.Artifact[string](t, run, "join", "all"); got != "0:a? 1:b? 2:c?" {
		t.Errorf("join's all = %q", got)
	}

	// Items replaces them; a stub fails one item's first attempt.
	run = flowtest.Run(t, foreachFlow(), flowtest.Items("process", "x", "y"), flowtest.Stub("process", func(c *flowtest.Call) error {
		if c.Item() == "y" && c.Attempt == 1 {
			return errors.New("flaky")
		}
		if c.Env["MANIFOLD_ITEM"] != c.Item() {
			t.Errorf("MANIFOLD_ITEM = %q for item %q", c.Env["MANIFOLD_ITEM"], c.Item())
		}
		return c.Put("out", c.Item())
	}))
	run.WantSuccess(t)
	run.WantAttempts(t, "process[0]", 1)
	run.WantAttempts(t, "process[1]", 2)
	if got := flowtest.Artifact[string](t, run, "join", "all"); got != "x y" {
		t.Errorf("join's all = %q", got)
	}
}

func TestCommandStubExitCode(t *testing.T) {
	flow := sdk.NewFlow("cmd", image, sdk.Param("epochs", "3")).
		Step("train", sdk.Command("torchrun", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"), sdk.Env("NCCL_DEBUG", "WARN")).
		Step("report", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("train"))
	var call *flowtest.Call
	run := flowtest.Run(t, flow, flowtest.Params("epochs=1"), flowtest.Stub("train", func(c *flowtest.Call) error {
		call = c
		return nil
	}, flowtest.Exit(3), flowtest.Puts("never", 1)))
	run.WantFailed(t, "train", "exit status 3")
	run.WantSkipped(t, "report", "train failed")
	if diff := cmp.Diff([]string{"torchrun", "train.py", "--epochs", "1"}, call.Argv); diff != "" {
		t.Errorf("Argv (-want +got):\n%s", diff)
	}
	if call.Env["NCCL_DEBUG"] != "WARN" || call.Env["MANIFOLD_PARAM_EPOCHS"] != "1" || call.Env["MANIFOLD_ARTIFACTS"] != filepath.Join(run.Dir(), "train") {
		t.Errorf("Env = %v", call.Env)
	}
	if task, _ := run.Task("train"); task.ExitCode == nil || *task.ExitCode != 3 {
		t.Errorf("exit code = %v, want 3", task.ExitCode)
	}
	if _, err := os.Stat(filepath.Join(run.Dir(), "train", "never.json")); err == nil {
		t.Error("an action after Exit(3) ran")
	}
}

func TestConfig(t *testing.T) {
	flow := sdk.NewFlow("config", image).Step("train", sdk.Command("torchrun", "train.py"))
	var env map[string]string
	stub := flowtest.Stub("train", func(c *flowtest.Call) error { env = c.Env; return nil })
	flowtest.Run(t, flow, stub, flowtest.Config("testdata/manifold.toml")).WantSuccess(t)
	if env["NCCL_DEBUG"] != "INFO" {
		t.Errorf("the config's env did not reach the step: %v", env)
	}
	flowtest.Run(t, flow, stub).WantSuccess(t)
	if _, ok := env["NCCL_DEBUG"]; ok {
		t.Errorf("without a manifold.toml here, the step got %v", env)
	}
}

func TestExecRunsTheCommand(t *testing.T) {
	flow := sdk.NewFlow("exec", image, sdk.Param("greeting", "hi")).
		Step("write", sdk.Command("sh", "-c", `echo "$MANIFOLD_PARAM_GREETING from $MANIFOLD_ITEM"; printf '"%s"' "$MANIFOLD_ITEM" > "$MANIFOLD_ARTIFACTS/item.json"`),
			sdk.Foreach("one", "two")).
		Step("fail", sdk.Command("sh", "-c", "echo giving up >&2; exit 4"), sdk.After("write"))
	run := flowtest.Run(t, flow, flowtest.Exec("write", "fail"))
	run.WantFailed(t, "fail", "exit status 4: giving up")
	if got := flowtest.ItemArtifact[string](t, run, "write", 1, "item"); got != "two" {
		t.Errorf("write[1]'s item = %q", got)
	}
	if got := run.Stdout("write[0]"); got != "hi from one\n" {
		t.Errorf("write[0] printed %q", got)
	}
	if task, _ := run.Task("fail"); task.ExitCode == nil || *task.ExitCode != 4 {
		t.Errorf("exit code = %v, want 4", task.ExitCode)
	}
}

func TestPanicInRunStep(t *testing.T) {
	flow := sdk.NewFlow("panics", image).Step("boom", sdk.Run(func(*sdk.Context) error { panic("oops") }))
	run := flowtest.Run(t, flow)
	run.WantFailed(t, "boom", "panic: oops")
}

// fakeT is a testing.TB that keeps what a test would report.
type fakeT struct {
	testing.TB
	mu     sync.Mutex
	msgs   []string
	failed bool
}

func (f *fakeT) Helper()           {}
func (f *fakeT) Output() io.Writer { return io.Discard }

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.failed = true
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	panic(f)
}

// report runs check with a fakeT and returns what it reported, one message
// after the other.
func report(t *testing.T, check func(testing.TB)) string {
	t.Helper()
	f := &fakeT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		check(f)
	}()
	return strings.Join(f.msgs, "\n---\n")
}

func TestFailureMessages(t *testing.T) {
	run := flowtest.Run(t, diamond())
	table := `run of flow diamond failed, 0s on the fake clock:
  STEP   STATE      EXIT  ATTEMPT  TIME  ERROR
  start  succeeded        1/1      0s
  left   succeeded        1/1      0s
  right  failed           1/1      0s    training: loss diverged
  join   skipped                         not started: right failed
`
	for name, tt := range map[string]struct {
		check func(testing.TB)
		want  string
	}{
		"success": {func(tb testing.TB) { run.WantSuccess(tb) },
			"flowtest: want the run to succeed, but step right failed: training: loss diverged; not started: join\n" + table},
		"ran": {func(tb testing.TB) { run.WantRan(tb, "start", "left", "right", "join") },
			"flowtest: want steps to start in the order start, left, right, join\n                      but they started as start, left, right\n" + table},
		"skipped": {func(tb testing.TB) { run.WantSkipped(tb, "left", "") },
			"flowtest: want left skipped, but it succeeded\n" + table},
		"skipped because": {func(tb testing.TB) { run.WantSkipped(tb, "join", "left failed") },
			`flowtest: want join skipped because "left failed", but it was skipped: not started: right failed` + "\n" + table},
		"failed": {func(tb testing.TB) { run.WantFailed(tb, "join", "") },
			"flowtest: want join to fail, but it was skipped: not started: right failed\n" + table},
		"failed with": {func(tb testing.TB) { run.WantFailed(tb, "right", "exit status 1") },
			`flowtest: want right to fail with an error holding "exit status 1", but it failed: training: loss diverged` + "\n" + table},
		"attempts": {func(tb testing.TB) { run.WantAttempts(tb, "right", 3) },
			"flowtest: want right to make 3 attempts, but it made 1 and failed: training: loss diverged\n" + table},
		"no such step": {func(tb testing.TB) { run.WantAttempts(tb, "trian", 1) },
			"flowtest: flow diamond has no step or item trian; it has start, left, right, join\n" + table},
		"before": {func(tb testing.TB) { run.WantBefore(tb, "right", "left") },
			"flowtest: want left to start after right ended, but it started first\n" + table},
		"before, never ended": {func(tb testing.TB) { run.WantBefore(tb, "join", "left") },
			"flowtest: want join to end before left, but join did not end (join was skipped: not started: right failed)\n" + table},
		"after skipped": {func(tb testing.TB) { run.WantBefore(tb, "left", "join") },
			"flowtest: want join to start after left ended, but join never started (join was skipped: not started: right failed)\n" + table},
		"artifact": {func(tb testing.TB) { flowtest.Artifact[int](tb, run, "join", "n") },
			`flowtest: step "join" has no artifact "n" (looked for ` + filepath.Join(run.Dir(), "join", "n.json") + `): did it run and Put it?` + "\n" + table},
		"artifact type": {func(tb testing.TB) { flowtest.Artifact[string](tb, run, "left", "n") },
			`flowtest: artifact "n" of step "left": json: cannot unmarshal number into Go value of type string` + "\n" + table},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, report(t, tt.check)); diff != "" {
				t.Errorf("reported (-want +got):\n%s", diff)
			}
		})
	}

	// What holds reports nothing.
	ok := report(t, func(tb testing.TB) {
		run.WantRan(tb, "start", "left", "right")
		run.WantBefore(tb, "start", "left", "right")
		run.WantSkipped(tb, "join", "right failed")
		run.WantFailed(tb, "right", "diverged")
		run.WantAttempts(tb, "left", 1)
	})
	if ok != "" {
		t.Errorf("checks that hold reported:\n%s", ok)
	}
}

func TestRunRefuses(t *testing.T) {
	cmd := sdk.NewFlow("refuse", image, sdk.Param("epochs", "1")).
		Step("prepare", sdk.Run(func(*sdk.Context) error { return nil })).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.After("prepare"))
	for name, tt := range map[string]struct {
		opts []flowtest.Option
		want string
	}{
		"command not stubbed": {nil,
			`flowtest: Command steps run a program a test does not run unless told: train (torchrun train.py); stub each with flowtest.Stub(STEP, actions...), or run it as a process with flowtest.Exec(STEP)`},
		"exec of a Run step": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Exec("prepare")},
			`flowtest.Exec("prepare"): prepare is a Run step, whose Go function runs in the test's process already; Exec runs Command steps`},
		"stub of no step": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Stub("trian")},
			`flowtest.Stub("trian"): flow refuse has no step "trian"; its steps are prepare, train`},
		"bad param": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Params("epochs:2")},
			`flowtest.Params("epochs:2"): write NAME=VALUE, such as epochs=1`},
		"unknown param": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Params("epoch=2")},
			"flowtest: flow refuse is invalid:\nparams[epoch]: Not found: \"epoch\": the flow's params are epochs"},
		"bad set": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Set("train.retries=2")},
			`flowtest.Set("train.retries=2"): unknown option "retries"; the options are cpu, disk, efa, gpu, gpuVendor, image, imagePullPolicy, inferentia, instanceType, memory, namespace, nodes, port, retry, retryBackoff, serviceAccount, sharedMemory, timeout, trainium`},
		"set of no step": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Set("trian.retry=2")},
			"flowtest: flow refuse is invalid:\nset[trian]: Not found: \"trian\": no step of that name; the flow's steps are prepare, train"},
		"config": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Config("testdata/none.toml")},
			`flowtest.Config("testdata/none.toml"): no such file`},
		"bad config": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Config("testdata/bad.toml")},
			"flowtest: testdata/bad.toml: unknown key retries;"},
		"items of a step without Foreach": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Items("train", "a", "b")},
			`flowtest.Items("train"): step train of flow refuse has no sdk.Foreach, so items would make it a foreach step it is not; give Items to a step declared with sdk.Foreach`},
		"items of no step": {[]flowtest.Option{flowtest.Stub("train"), flowtest.Items("trian", "a")},
			`flowtest.Items("trian"): flow refuse has no step "trian"; its steps are prepare, train`},
	} {
		t.Run(name, func(t *testing.T) {
			got := report(t, func(tb testing.TB) { flowtest.Run(tb, cmd, tt.opts...) })
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("reported:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
