package job_test

import (
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/testflows"
)

// BenchmarkCompileAndEmit100 compiles and emits a 100-step flow, reporting the
// bytes of YAML per step.
func BenchmarkCompileAndEmit100(b *testing.B) {
	const steps = 100
	f := testflows.Wide(steps)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		p, errs := compile.Compile(f, compile.Options{})
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		files, errs := emit.Files(job.Target{}, p)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		size = len(files[0].Data)
	}
	b.ReportMetric(float64(size)/steps, "bytes/step")
}
