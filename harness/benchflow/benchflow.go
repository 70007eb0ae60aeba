// Package benchflow generates the flows that the compile benchmarks measure: n
// steps in a linear chain or fanned out from one step to n-2 parallel steps and
// joined again, mixing what real flows ask for so that every target writes every
// kind of step. Every tenth step runs on two nodes (Trainium and EFA on
// trn1.32xlarge), and the others cycle through GPU, Inferentia, foreach, env vars
// and retries.
package benchflow

import (
	"fmt"
	"strconv"
	"time"

	"github.com/manifoldflow/manifold/sdk"
)

// Shape is how a generated flow's steps are ordered.
type Shape string

// The shapes Flow generates.
const (
	// Chain runs each step after the one before.
	Chain Shape = "chain"
	// FanOut runs one step, then every step but the last in parallel after it,
	// then the last after all of them.
	FanOut Shape = "fanout"
)

// Shapes lists every shape, in the order reports show them.
var Shapes = []Shape{Chain, FanOut}

// Sizes are the step counts the benchmarks measure.
var Sizes = []int{10, 100, 1000, 10000}

// Options varies what a generated flow's steps ask for.
type Options struct {
	// SingleNode leaves out the multi-node steps.
	SingleNode bool
}

// StepName is the name of step i.
func StepName(i int) string { return "s" + strconv.Itoa(i) }

func nop(*sdk.Context) error { return nil }

// Flow returns a flow of n steps (n ≥ 3 for FanOut) of the given shape.
func Flow(shape Shape, n int, o Options) *sdk.Flow {
	f := sdk.NewFlow(fmt.Sprintf("bench-%s-%d", shape, n), sdk.Image("registry.example.com/ml/bench:v1"),
		sdk.Param("epochs", "3"), sdk.Toleration("dedicated", "ml", "NoSchedule"))
	for i := range n {
		opts := append(after(shape, n, i), options(i, o)...)
		f.Step(StepName(i), opts...)
	}
	return f
}

// after returns the order of step i of n.
func after(shape Shape, n, i int) []sdk.StepOption {
	switch {
	case i == 0:
		return nil
	case shape == Chain:
		return []sdk.StepOption{sdk.After(StepName(i - 1))}
	case i < n-1:
		return []sdk.StepOption{sdk.After(StepName(0))}
	}
	all := make([]string, 0, n-2)
	for j := 1; j < n-1; j++ {
		all = append(all, StepName(j))
	}
	return []sdk.StepOption{sdk.After(all...)}
}

// options returns what step i asks for: one in ten runs on two nodes.
func options(i int, o Options) []sdk.StepOption {
	opts := []sdk.StepOption{sdk.CPU("2"), sdk.Memory("8Gi")}
	if i%2 == 0 {
		opts = append(opts, sdk.Run(nop))
	} else {
		opts = append(opts, sdk.Command("python", "train.py", "--shard", strconv.Itoa(i)))
	}
	if i%3 == 0 {
		opts = append(opts, sdk.Env("SHARD", strconv.Itoa(i)), sdk.Env("LOG_LEVEL", "info"))
	}
	if i%4 == 1 {
		opts = append(opts, sdk.Retry(2), sdk.Timeout(time.Hour))
	}
	switch i % 10 {
	case 9:
		if !o.SingleNode {
			return append(opts, sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring())
		}
	case 1, 5:
		return append(opts, sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring(), sdk.SharedMemory("64Gi"))
	case 2:
		return append(opts, sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1))
	case 3, 7:
		return append(opts, sdk.GPU(1))
	case 4:
		return append(opts, sdk.Foreach("a", "b", "c"))
	}
	return opts
}
