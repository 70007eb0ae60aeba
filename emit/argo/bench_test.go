package argo_test

import (
	"testing"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/internal/testflows"
)

// BenchmarkEmit100 emits a compiled 100-step flow, reporting the bytes of YAML per
// step (the goal is at most 1.5 KB).
func BenchmarkEmit100(b *testing.B) {
	const steps = 100
	p := testflows.Compile(b, testflows.Wide(steps))
	b.ReportAllocs()
	var size int
	for b.Loop() {
		files, errs := argo.Target{}.Emit(p)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		size = len(files[0].Data)
	}
	b.ReportMetric(float64(size)/steps, "bytes/step")
}
