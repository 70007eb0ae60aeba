// Command benchflow is a generated benchmark flow as a flow program, so that its
// compile can be measured as a user runs it: BENCHFLOW=SHAPE:STEPS (chain:1000,
// fanout:10000) chooses the flow, then the usual arguments follow, as in
// `BENCHFLOW=chain:10000 benchflow compile --target all -o DIR`. The shape
// runchain is a chain of Run steps that do nothing (testflows.RunChain), for
// the local runner: `BENCHFLOW=runchain:100 benchflow run`.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/harness/testflows"
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
	cli.Main(benchflow.Flow(benchflow.Shape(shape), n, benchflow.Options{}))
}
