// Command benchflow is a generated benchmark flow as a flow program, so that its
// compile can be measured as a user runs it: BENCHFLOW=SHAPE:STEPS (chain:1000,
// fanout:10000) chooses the flow, then the usual arguments follow, as in
// `BENCHFLOW=chain:10000 benchflow compile --target all -o DIR`. The shape
// runchain is a chain of Run steps that do nothing (testflows.RunChain), for
// the local runner: `BENCHFLOW=runchain:100 benchflow run`.
//
// BENCHFLOW_CPUPROFILE=FILE writes a CPU profile of the whole command to FILE,
// and BENCHFLOW_MEMPROFILE=FILE a profile of what it allocated, for `go tool
// pprof`.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/sdk"
)

func main() {
	shape, steps, ok := strings.Cut(os.Getenv("BENCHFLOW"), ":")
	n, err := strconv.Atoi(steps)
	if ok && err == nil && shape == "runchain" {
		cli.Main(testflows.RunChain(n))
		return
	}
	if !ok || err != nil || (benchflow.Shape(shape) != benchflow.Chain && benchflow.Shape(shape) != benchflow.FanOut) {
		fmt.Fprintln(os.Stderr, "benchflow: set BENCHFLOW=SHAPE:STEPS, SHAPE chain, fanout or runchain (BENCHFLOW=chain:1000)")
		os.Exit(2)
	}
	flow := benchflow.Flow(benchflow.Shape(shape), n, benchflow.Options{})
	if os.Getenv("BENCHFLOW_CPUPROFILE") != "" || os.Getenv("BENCHFLOW_MEMPROFILE") != "" {
		os.Exit(profiled(os.Getenv("BENCHFLOW_CPUPROFILE"), os.Getenv("BENCHFLOW_MEMPROFILE"), flow))
	}
	cli.Main(flow)
}

// profiled runs the command line for flow with a CPU profile written to cpu
// and an allocation profile to mem, each when not "", and returns its exit
// status.
func profiled(cpu, mem string, flow *sdk.Flow) int {
	if cpu != "" {
		f, err := os.Create(cpu)
		if err == nil {
			defer f.Close()
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchflow: BENCHFLOW_CPUPROFILE:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	code := cli.Run(context.Background(), flow, os.Args, os.Stdout, os.Stderr)
	if mem != "" {
		f, err := os.Create(mem)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchflow: BENCHFLOW_MEMPROFILE:", err)
			return 2
		}
	}
	return code
}
