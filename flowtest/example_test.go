package flowtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/flowtest"
	"github.com/manifoldflow/manifold/sdk"
)

// t stands for the *testing.T of a test function, so that the examples read as
// the tests they are in a flow's package (func TestHello(t *testing.T) {...})
// and run as examples. It reports a failure on standard output, where the
// example's Output comment catches it.
var t testing.TB = &exampleT{}

// exampleRoot holds the examples' run directories; TestMain removes it.
var exampleRoot, _ = os.MkdirTemp("", "flowtest-example-")

// exampleT is what the examples' t is: a testing.TB whose methods flowtest
// calls are its own.
type exampleT struct{ testing.TB }

func (*exampleT) Helper()                           {}
func (*exampleT) Output() io.Writer                 { return io.Discard }
func (*exampleT) Context() context.Context          { return context.Background() }
func (*exampleT) TempDir() string                   { d, _ := os.MkdirTemp(exampleRoot, ""); return d }
func (*exampleT) Errorf(format string, args ...any) { fmt.Printf("FAIL: "+format+"\n", args...) }
func (e *exampleT) Fatalf(format string, args ...any) {
	e.Errorf(format, args...)
	panic("test stopped")
}

// hello is the flow of examples/hello.
var hello = sdk.NewFlow("hello", image, sdk.Param("name", "world")).
	Step("greet", sdk.Run(func(ctx *sdk.Context) error {
		return ctx.Put("greeting", "hello, "+ctx.Param("name"))
	})).
	Step("shout", sdk.Run(func(ctx *sdk.Context) error {
		var msg string
		if err := ctx.Get("greet", "greeting", &msg); err != nil {
			return err
		}
		return ctx.Put("shout", strings.ToUpper(msg)+"!")
	}), sdk.After("greet")).
	Step("echo", sdk.After("shout"),
		sdk.Command("sh", "-c", `echo "hello, $MANIFOLD_PARAM_NAME, from a Command step"`))

// A test of a flow runs it, checks that it succeeded, and reads what its steps
// put. Exec runs the Command step as the run command would.
func ExampleRun() {
	run := flowtest.Run(t, hello, flowtest.Params("name=manifold"), flowtest.Exec("echo"))
	run.WantSuccess(t)
	run.WantRan(t, "greet", "shout", "echo")
	fmt.Println(flowtest.Artifact[string](t, run, "shout", "shout"))
	fmt.Print(run.Stdout("echo"))
	// Output:
	// HELLO, MANIFOLD!
	// hello, manifold, from a Command step
}

// A stub stands for a Command step: here torchrun, which fails its first
// attempt (as a node lost mid-run would) and puts the model on the second. The
// fake clock waits out the backoff and the hours of training at once.
func ExampleStub() {
	flow := sdk.NewFlow("train", image).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Retry(2), sdk.RetryBackoff(5*time.Minute)).
		Step("evaluate", sdk.Run(func(ctx *sdk.Context) error {
			var model string
			if err := ctx.Get("train", "model", &model); err != nil {
				return err
			}
			return ctx.Put("score", len(model))
		}), sdk.After("train"))

	run := flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Takes(3*time.Hour), func(c *flowtest.Call) error {
		if c.Attempt == 1 {
			return &flowtest.ExitError{Code: 137}
		}
		return c.Put("model", "s3://models/llama")
	}))
	run.WantSuccess(t)
	run.WantAttempts(t, "train", 2)
	fmt.Println(run.Elapsed())
	fmt.Println(flowtest.Artifact[int](t, run, "evaluate", "score"))
	// Output:
	// 6h5m0s
	// 17
}

// A step that runs past its timeout fails; the steps after it do not start.
// Err reads as the run command's error.
func ExampleResult_WantSkipped() {
	flow := sdk.NewFlow("slow", image).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.Timeout(6*time.Hour)).
		Step("evaluate", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("train"))

	run := flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Takes(7*time.Hour)))
	run.WantFailed(t, "train", "timed out")
	run.WantSkipped(t, "evaluate", "train failed")
	fmt.Println(run.Err())
	// Output:
	// step train failed: timed out after 6h0m0s; not started: evaluate
}

// A step's error is kept as it returned it, for errors.Is and errors.As.
func ExampleResult_StepErr() {
	errNoData := errors.New("no data")
	flow := sdk.NewFlow("load", image, sdk.Param("day", "2026-12-01")).Step("load", sdk.Run(func(ctx *sdk.Context) error {
		return fmt.Errorf("loading %s: %w", ctx.Param("day"), errNoData)
	})).Step("train", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("load"))

	run := flowtest.Run(t, flow)
	fmt.Println(errors.Is(run.StepErr("load"), errNoData))
	fmt.Println(run.Started())
	// Output:
	// true
	// [load]
}

// Items replaces a foreach step's items, and ItemArtifact reads what one item
// put.
func ExampleItemArtifact() {
	flow := sdk.NewFlow("regions", image).Step("process", sdk.Run(func(ctx *sdk.Context) error {
		return ctx.Put("result", fmt.Sprintf("%s: %d", ctx.Item(), ctx.Index()))
	}), sdk.Foreach("us-east-1", "us-west-2", "eu-west-1"))

	run := flowtest.Run(t, flow, flowtest.Items("process", "ap-south-1", "sa-east-1"))
	run.WantSuccess(t)
	fmt.Println(run.Started())
	fmt.Println(flowtest.ItemArtifact[string](t, run, "process", 1, "result"))
	// Output:
	// [process[0] process[1]]
	// sa-east-1: 1
}
