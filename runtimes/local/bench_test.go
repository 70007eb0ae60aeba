package local_test

import (
	"os/exec"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// BenchmarkOverhead runs a chain of 200 steps that each run `true`, one at a time,
// and compares it with starting `true` 200 times directly. overhead-ms/step is
// what the runner adds to each step: ordering, environment, process group, pipes,
// logs and state files. The goal is under 5 ms.
func BenchmarkOverhead(b *testing.B) { benchmarkRun(b, 200) }

// BenchmarkRun1000 is BenchmarkOverhead on a chain of 1,000 steps: the runner's
// cost per step must not grow with the flow.
func BenchmarkRun1000(b *testing.B) { benchmarkRun(b, 1000) }

func benchmarkRun(b *testing.B, steps int) {
	p := compileFlow(b, testflows.Chain(steps), nil)
	root := b.TempDir()
	var runs, direct time.Duration
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		res, err := local.Run(b.Context(), p, local.Options{Root: root, MaxParallel: 1})
		if err != nil || res.State != record.Succeeded {
			b.Fatalf("run: %v", err)
		}
		runs += time.Since(start)

		b.StopTimer()
		start = time.Now()
		for range steps {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		direct += time.Since(start)
		n++
		b.StartTimer()
	}
	perStep := float64(runs.Microseconds()) / 1000 / float64(n*steps)
	perProcess := float64(direct.Microseconds()) / 1000 / float64(n*steps)
	b.ReportMetric(perStep, "ms/step")
	b.ReportMetric(perProcess, "ms/process")
	b.ReportMetric(perStep-perProcess, "overhead-ms/step")
}
