// Package testflows holds the flows and helpers that the tests of several targets
// share, so that every target is measured and validated on the same inputs.
package testflows

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// Wide is a chain of n Trainium steps, each after the one before: what the
// bytes-per-step benchmarks emit.
func Wide(n int) *sdk.Flow {
	f := sdk.NewFlow("bench", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule"))
	for i := range n {
		opts := []sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"),
			sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(time.Hour), sdk.SharedMemory("64Gi")}
		if i > 0 {
			opts = append(opts, sdk.After(fmt.Sprintf("s%d", i-1)))
		}
		f.Step(fmt.Sprintf("s%d", i), opts...)
	}
	return f
}

// EveryOption uses every pod option, on four steps that share some values and
// differ in others (service account, image, foreach).
func EveryOption() *sdk.Flow {
	return sdk.NewFlow("every", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"), sdk.Param("lr", "0.1"),
		sdk.Namespace("ml"), sdk.ServiceAccount("trainer"), sdk.ImagePullSecret("ecr"),
		sdk.Toleration("dedicated", "ml", "NoSchedule"), sdk.Toleration("", "", ""),
		sdk.Label("team", "ml"), sdk.Annotation("example.com/owner", "ml@example.com")).
		Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"),
			sdk.Trainium(16), sdk.EFA(8), sdk.CPU("100"), sdk.Memory("400Gi"), sdk.Disk("500Gi"),
			sdk.SharedMemory("64Gi"), sdk.Resource("example.com/license", 1),
			sdk.NodeSelector("karpenter.sh/capacity-type", "on-demand"),
			sdk.Env("A", "1"), sdk.SecretEnv("TOKEN", "hf", "token"), sdk.Secret("wandb"),
			sdk.Label("role", "train"), sdk.Annotation("example.com/note", "big"),
			sdk.Volume("data", "/data"), sdk.Volume("ckpt", "/checkpoints"), sdk.Port(29500),
			sdk.RunAsUser(1000), sdk.RunAsNonRoot(true), sdk.ImagePullPolicy("IfNotPresent"),
			sdk.Retry(3), sdk.RetryBackoff(time.Minute), sdk.Timeout(90*time.Minute+500*time.Millisecond)).
		Step("serve", sdk.After("train"), sdk.Command("serve"), sdk.InstanceType("inf2.48xlarge"),
			sdk.Resource("aws.amazon.com/neuroncore", 24), sdk.ServiceAccount("server"),
			sdk.Queue("inference"), sdk.Priority("high"), sdk.Topology("example.com/block"), sdk.HostNetwork(true)).
		Step("gpu", sdk.After("train"), sdk.Command("nvidia-smi"), sdk.InstanceType("p5.48xlarge"),
			sdk.GPU(8), sdk.EFAAll(), sdk.EFAWiring(), sdk.Env("NCCL_DEBUG", "INFO"), sdk.Foreach("a", "b")).
		Step("amd", sdk.After("serve", "gpu"), sdk.Command("rocm-smi"), sdk.GPU(1), sdk.GPUVendor("amd"),
			sdk.Image("rocm/pytorch:latest")).
		Step("dra", sdk.After("train"), sdk.Command("neuron-ls"), sdk.InstanceType("trn2.48xlarge"),
			sdk.Trainium(4), sdk.EFA(4), sdk.DRA(), sdk.Claim("shared-fpga"), sdk.Foreach("a", "b"))
}

// Compile compiles f with default options, failing the test on any error.
func Compile(t testing.TB, f *sdk.Flow) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs.ToAggregate())
	}
	return p
}

// Write compiles f, emits it for target, and writes its one file to
// dir/name.yaml, returning that path.
func Write(t testing.TB, target emit.Target, f *sdk.Flow, dir, name string) string {
	t.Helper()
	files, errs := emit.Files(target, Compile(t, f))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", name, errs.ToAggregate())
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, files[0].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Chain is a flow of n Command steps that run `true`, s000, s001, …, each after the
// one before: what the runtimes' per-step benchmarks run.
func Chain(n int) *sdk.Flow {
	f := sdk.NewFlow("chain", sdk.Image("registry.example.com/chain:v1"))
	for i := range n {
		opts := []sdk.StepOption{sdk.Command("true")}
		if i > 0 {
			opts = append(opts, sdk.After(ChainStep(i-1)))
		}
		f.Step(ChainStep(i), opts...)
	}
	return f
}

// RunChain is Chain with Run steps that do nothing: each step is a start of the
// flow program (`<program> step NAME`), what the local runner's chain benchmark
// runs.
func RunChain(n int) *sdk.Flow {
	f := sdk.NewFlow("run-chain", sdk.Image("registry.example.com/chain:v1"))
	for i := range n {
		opts := []sdk.StepOption{sdk.Run(func(*sdk.Context) error { return nil })}
		if i > 0 {
			opts = append(opts, sdk.After(ChainStep(i-1)))
		}
		f.Step(ChainStep(i), opts...)
	}
	return f
}

// FanOut is a flow of n Command steps that run `true`, s000, s001, …, none
// waiting for another, each asking a sliver of CPU and memory: what the
// runtimes' load benchmarks run.
func FanOut(n int) *sdk.Flow {
	f := sdk.NewFlow("fan-out", sdk.Image("registry.example.com/chain:v1"), sdk.CPU("1m"), sdk.Memory("1Mi"))
	for i := range n {
		f.Step(ChainStep(i), sdk.Command("true"))
	}
	return f
}

// SplitChains is a flow of 14 Command steps that argo_max_bytes = 5000 splits
// into parts: prepare; three chains a, b and c of four steps (a0 to a3, …)
// after it, each with a long variable that makes it large enough to split by
// bytes; and report after the three. It returns the flow and its steps in
// order. Step b2 gets the options fail (none: it succeeds like the others).
func SplitChains(name, image string, fail ...sdk.StepOption) (*sdk.Flow, []string) {
	f := sdk.NewFlow(name, sdk.Image(image), sdk.Param("p", "v"))
	f.Step("prepare", sdk.Command("true"))
	steps := []string{"prepare"}
	for _, b := range []string{"a", "b", "c"} {
		for i := range 4 {
			after := "prepare"
			if i > 0 {
				after = fmt.Sprint(b, i-1)
			}
			opts := []sdk.StepOption{sdk.Command("true"), sdk.After(after), sdk.Env("NOTE", strings.Repeat("n", 300))}
			if b == "b" && i == 2 {
				opts = append(opts, fail...)
			}
			f.Step(fmt.Sprint(b, i), opts...)
			steps = append(steps, fmt.Sprint(b, i))
		}
	}
	f.Step("report", sdk.Command("true"), sdk.After("a3", "b3", "c3"))
	return f, append(steps, "report")
}

// ChainStep is the name of step i of Chain and FanOut.
func ChainStep(i int) string { return fmt.Sprintf("s%03d", i) }
