package cli_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/harness/proctest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/sdk"
)

// Test flows. Each one is a command of the scripts under testdata/script, named after
// the flow: testscript re-runs this test binary under that name.

// trainFlow mirrors examples/neuron-train: a Run step, a Command step on Trainium with
// wired EFA, and a Run step on Inferentia that reads the first step's artifact.
var trainFlow = sdk.NewFlow("trainflow",
	sdk.Image("registry.example.com/ml/trainflow:v1"),
	sdk.Param("epochs", "3"),
).
	Step("prepare", sdk.Run(prepare), sdk.CPU("4"), sdk.Memory("16Gi")).
	Step("train", sdk.After("prepare"),
		sdk.Image("public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0"),
		sdk.Command("torchrun", "--nproc_per_node=32", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
		sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring(),
		sdk.Retry(2), sdk.Timeout(6*time.Hour)).
	Step("evaluate", sdk.Run(evaluate), sdk.After("train"),
		sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1))

// claimFlow claims its step's devices through DRA when CLAIMFLOW_DRA is set:
// its argo and airflow output then has a <flow>.claims.yaml, else not.
func claimFlow() *sdk.Flow {
	opts := []sdk.StepOption{sdk.Command("train"), sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(4), sdk.EFA(4), sdk.EFAWiring()}
	if os.Getenv("CLAIMFLOW_DRA") != "" {
		opts = append(opts, sdk.DRA())
	}
	return sdk.NewFlow("claimflow", sdk.Image("registry.example.com/claim:v1")).Step("train", opts...)
}

// manyWarningsFlow has 25 steps that each ask for EFA nothing wires: 25
// warnings.
func manyWarningsFlow() *sdk.Flow {
	f := sdk.NewFlow("manyflow", sdk.Image("registry.example.com/many:v1"))
	for i := range 25 {
		f.Step(fmt.Sprintf("s%02d", i), sdk.Command("true"), sdk.EFA(1))
	}
	return f
}

// tcpFlow compiles, with warnings: its multi-node Trainium step asks for no EFA,
// and its GPU step asks for EFA that nothing wires.
var tcpFlow = sdk.NewFlow("tcpflow", sdk.Image("registry.example.com/tcp:v1")).
	Step("pretrain", sdk.Command("torchrun", "train.py"), sdk.Nodes(2),
		sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16)).
	Step("finetune", sdk.Command("torchrun", "tune.py"), sdk.After("pretrain"),
		sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll())

// shellFlow compiles, with a warning: its first step's shell script holds
// $(MANIFOLD_PARAM_NAME), which the kubelet writes into the script's text; its
// second reads the variable in the shell.
var shellFlow = sdk.NewFlow("shellflow", sdk.Image("busybox:1.37"), sdk.Param("name", "world")).
	Step("unsafe", sdk.Command("sh", "-c", `echo "hello, $(MANIFOLD_PARAM_NAME)"`)).
	Step("safe", sdk.Command("sh", "-c", `echo "hello, $MANIFOLD_PARAM_NAME"`), sdk.After("unsafe"))

func prepare(ctx *sdk.Context) error {
	shards := []string{"shard-000", "shard-001", "shard-002"}
	fmt.Printf("prepared %d shards for %s epochs\n", len(shards), ctx.Param("epochs"))
	return ctx.Put("shards", shards)
}

func evaluate(ctx *sdk.Context) error {
	var shards []string
	if err := ctx.Get("prepare", "shards", &shards); err != nil {
		return err
	}
	fmt.Printf("evaluated %s over %d shards\n", strings.Join(shards, ","), len(shards))
	return nil
}

// fanFlow fans a step out over three regions and joins the results. It sets no image:
// its scripts give one in manifold.toml.
var fanFlow = sdk.NewFlow("fanflow").
	Step("fan", sdk.Run(fan), sdk.Foreach("us-east-1", "us-west-2", "eu-west-1")).
	Step("join", sdk.Run(join), sdk.After("fan"))

func fan(ctx *sdk.Context) error {
	fmt.Printf("item %s index %d\n", ctx.Item(), ctx.Index())
	return ctx.Put("result", fmt.Sprintf("%s#%d", ctx.Item(), ctx.Index()))
}

func join(ctx *sdk.Context) error {
	var results []string
	for i := range 3 {
		var r string
		if err := ctx.GetIndex("fan", i, "result", &r); err != nil {
			return err
		}
		results = append(results, r)
	}
	fmt.Println("joined", strings.Join(results, " "))
	return nil
}

// shakyFlow fans a Run step out over two items, and has a Command step that
// fails twice before it succeeds.
var shakyFlow = sdk.NewFlow("shakyflow", sdk.Image("registry.example.com/shaky:v1")).
	Step("fan", sdk.Foreach("a", "b"), sdk.Run(func(ctx *sdk.Context) error {
		fmt.Printf("item %s\n", ctx.Item())
		return ctx.Put("result", map[string]any{"item": ctx.Item(), "index": ctx.Index()})
	})).
	Step("shaky", sdk.Retry(2), sdk.RetryBackoff(10*time.Millisecond), sdk.Command("sh", "-c",
		`n=`+"`"+`cat "$MANIFOLD_ARTIFACTS/n" 2>/dev/null || echo 0`+"`"+`; n=`+"`"+`expr $n + 1`+"`"+`; echo $n > "$MANIFOLD_ARTIFACTS/n"; echo "try $n"; `+
			`if [ $n -lt 3 ]; then echo "failed $n" >&2; exit 3; fi; echo "{\"tries\": $n}" > "$MANIFOLD_ARTIFACTS/tries.json"`))

// badFlow has mistakes in several steps; every one must be reported.
var badFlow = sdk.NewFlow("badflow").
	Step("prepare", sdk.Run(noop), sdk.Image("registry.example.com/bad:v1"), sdk.Retry(-1)).
	Step("train", sdk.After("prepare", "missing"),
		sdk.Command("torchrun", "train.py"), // and no image
		sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(0), sdk.EFA(32)).
	Step("evaluate", sdk.Run(noop), sdk.After("train"), sdk.Image("registry.example.com/bad:v1"),
		sdk.InstanceType("inf9.huge"))

func noop(*sdk.Context) error { return nil }

// panicFlow has a step that panics and one that fails.
var panicFlow = sdk.NewFlow("panicflow", sdk.Image("registry.example.com/panic:v1")).
	Step("boom", sdk.Run(func(*sdk.Context) error { panic("kaboom") })).
	Step("fail", sdk.Run(func(*sdk.Context) error { return errors.New("disk full") }))

// cronFlow is valid, but the job target makes a CronJob only of a one-step flow:
// compile fails where validate passes. Its steps keep no artifacts, and say so.
var cronFlow = sdk.NewFlow("cronflow", sdk.Image("registry.example.com/cron:v1"), sdk.Schedule("0 3 * * *"), sdk.NoArtifacts()).
	Step("extract", sdk.Run(noop)).
	Step("load", sdk.Run(noop), sdk.After("extract"))

// sleepyFlow runs until it is interrupted: a Command step with a grandchild that
// sleeps, and a Run step that keeps rewriting an artifact until its context ends.
var sleepyFlow = sdk.NewFlow("sleepyflow", sdk.Image("registry.example.com/sleepy:v1")).
	Step("nap", sdk.Command("sh", "-c", `sleep 300 & echo $! > "$MANIFOLD_ARTIFACTS/child"; wait`)).
	Step("scribble", sdk.Run(func(ctx *sdk.Context) error {
		for i := 0; ctx.Err() == nil; i++ {
			if err := ctx.Put("count", i); err != nil {
				return err
			}
		}
		return ctx.Err()
	})).
	Step("never", sdk.After("nap", "scribble"), sdk.Command("true"))

// resumeFlow fails at its second step until the file "fixed" exists in the
// working directory; its first step says its param.
var resumeFlow = sdk.NewFlow("resumeflow", sdk.Image("registry.example.com/resume:v1"), sdk.Param("greeting", "hello")).
	Step("greet", sdk.Command("sh", "-c", `echo "greet: $MANIFOLD_PARAM_GREETING"`)).
	Step("check", sdk.After("greet"), sdk.Command("sh", "-c", `test -e fixed || { echo "not fixed" >&2; exit 3; }`))

// envStatus names the file where a flow command records its exit status, for the
// scripts' status command.
const envStatus = "CLITEST_STATUS"

// withCluster runs the tests, then stops the simulated cluster that
// simcluster.Shared started for them, if any.
type withCluster struct{ m *testing.M }

func (w withCluster) Run() int { return simcluster.Main(w.m) }

func TestMain(m *testing.M) {
	testscript.Main(withCluster{m}, map[string]func(){
		"trainflow":  flowMain(trainFlow),
		"fanflow":    flowMain(fanFlow),
		"badflow":    flowMain(badFlow),
		"tcpflow":    flowMain(tcpFlow),
		"shellflow":  flowMain(shellFlow),
		"claimflow":  func() { flowMain(claimFlow())() },
		"manyflow":   func() { flowMain(manyWarningsFlow())() },
		"panicflow":  flowMain(panicFlow),
		"cronflow":   flowMain(cronFlow),
		"sleepyflow": flowMain(sleepyFlow),
		"shakyflow":  flowMain(shakyFlow),
		"resumeflow": flowMain(resumeFlow),
	})
}

// flowMain is what cli.Main does (signals included), with the exit status also written where the status
// command reads it. The previous status is removed first, so a status that cli.Run
// did not return (a crash) is never recorded, and never mistaken for an older one.
func flowMain(flow *sdk.Flow) func() {
	return func() {
		path := os.Getenv(envStatus)
		if path != "" {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintln(os.Stderr, "clearing the exit status:", err)
				os.Exit(100)
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, flow, os.Args, os.Stdout, os.Stderr)
		stop()
		if path != "" {
			if err := os.WriteFile(path, []byte(strconv.Itoa(code)), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "recording the exit status:", err)
				os.Exit(100)
			}
		}
		os.Exit(code)
	}
}

func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			env.Setenv(envStatus, filepath.Join(env.WorkDir, ".status"))
			// What the flow programs (this test binary) were built with.
			env.Setenv("BUILTGO", runtime.Version())
			env.Setenv("BUILTFOR", runtime.GOOS+"/"+runtime.GOARCH)
			return nil
		},
		Cmds: map[string]func(*testscript.TestScript, bool, []string){
			"status":   cmdStatus,
			"waitfile": cmdWaitFile,
			"gone":     cmdGone,
			"only":     cmdOnly,
			"decode":   cmdDecode,
		},
	})
}

// cmdStatus checks the exit status of the last flow command: `status N`. `!` alone
// only says the status was not 0; this tells 1 (invalid flow) from 2 (usage). The
// status is consumed, so each check needs a fresh flow command before it.
func cmdStatus(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! status")
	}
	if len(args) != 1 {
		ts.Fatalf("usage: status N")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("status %q: want a number", args[0])
	}
	path := ts.Getenv(envStatus)
	data, err := os.ReadFile(path)
	if err != nil {
		ts.Fatalf("no exit status recorded since the last status check: %v", err)
	}
	ts.Check(os.Remove(path))
	got, err := strconv.Atoi(string(data))
	ts.Check(err)
	if got != want {
		ts.Fatalf("exit status %d, want %d", got, want)
	}
}

// cmdOnly checks that a directory holds exactly the files named, hidden ones
// included: `only DIR NAME...`.
func cmdOnly(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: only DIR NAME...")
	}
	entries, err := os.ReadDir(ts.MkAbs(args[0]))
	ts.Check(err)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := slices.Sorted(slices.Values(args[1:]))
	if !slices.Equal(got, want) {
		ts.Fatalf("%s holds %v, want %v", args[0], got, want)
	}
}

// cmdWaitFile waits for a file to exist: `waitfile PATH`.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile PATH")
	}
	path := ts.MkAbs(args[0])
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	ts.Fatalf("%s did not appear", path)
}

// cmdGone waits for the process whose ID a file holds to end: `gone PIDFILE`.
func cmdGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: gone PIDFILE")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	ts.Check(err)
	ts.Check(proctest.WaitGone(pid, 10*time.Second))
}
