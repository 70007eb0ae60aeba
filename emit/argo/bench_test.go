package argo_test

import (
	"fmt"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// BenchmarkEmit100 emits a compiled 100-step flow, reporting the bytes of YAML per
// step (the goal is at most 1.5 KB).
func BenchmarkEmit100(b *testing.B) {
	benchmarkEmit(b, testflows.Compile(b, testflows.Wide(100)))
}

// BenchmarkEmit100MultiNode emits the same flow with every step on two nodes, as
// resource templates that create JobSets: each manifest holds its whole pod.
func BenchmarkEmit100MultiNode(b *testing.B) {
	o := compile.Options{Config: compile.Config{ArgoMultiNode: plan.ArgoJobSet}, Overrides: map[string][]sdk.StepOption{}}
	for i := range 100 {
		o.Overrides[fmt.Sprintf("s%d", i)] = []sdk.StepOption{sdk.Nodes(2)}
	}
	p, errs := compile.Compile(testflows.Wide(100), o)
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	benchmarkEmit(b, p)
}

func benchmarkEmit(b *testing.B, p *plan.Flow) {
	b.ReportAllocs()
	var size int
	for b.Loop() {
		files, errs := emit.Files(argo.Target{}, p)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		size = len(files[0].Data)
	}
	b.ReportMetric(float64(size)/float64(len(p.Steps)), "bytes/step")
}
