package local_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/exampletest"
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

// BenchmarkChain100 runs a chain of 100 Run steps that do nothing as a user
// runs it, `benchflow run` (BENCHFLOW=runchain:100, tools/benchflow), a whole
// process each time: s/chain100 is its wall time, the goal under 1 s. Each step
// starts the flow program (`benchflow step NAME`); ms/step-start is that start
// alone, timed as 100 direct starts of one step, and ms/step-overhead what the
// runner adds to each step over it, its own start and the run's records
// included (the goal at most 5 ms). A loaded machine stretches wall times
// unevenly; ms-cpu/step-overhead is the same difference in CPU time (the run's
// processes against the 100 starts'), which load does not stretch.
func BenchmarkChain100(b *testing.B) {
	const steps = 100
	dir := b.TempDir()
	bin := filepath.Join(dir, "benchflow")
	build := exec.Command("go", "build", "-o", bin, "./tools/benchflow")
	build.Dir = exampletest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building tools/benchflow: %v\n%s", err, out)
	}
	env := append(os.Environ(), "BENCHFLOW=runchain:100")
	runDir := filepath.Join(dir, "direct")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		b.Fatal(err)
	}
	// run runs the program and returns the CPU time it and the processes it
	// waited for took.
	run := func(env []string, args ...string) time.Duration {
		b.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("benchflow %v: %v\n%s", args, err, out.Bytes())
		}
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	// Medians, of the chains and of the single starts: the load of a shared
	// machine comes in bursts.
	var chains, starts, chainCPU, startCPU []time.Duration
	for b.Loop() {
		start := time.Now()
		chainCPU = append(chainCPU, run(env, "run"))
		chains = append(chains, time.Since(start))

		b.StopTimer()
		for range steps {
			start = time.Now()
			startCPU = append(startCPU, run(append(env, "MANIFOLD_RUN_DIR="+runDir), "step", testflows.ChainStep(1)))
			starts = append(starts, time.Since(start))
		}
		b.StartTimer()
	}
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	chain, start := median(chains), ms(median(starts))
	b.ReportMetric(chain.Seconds(), "s/chain100")
	b.ReportMetric(start, "ms/step-start")
	b.ReportMetric(ms(chain)/steps-start, "ms/step-overhead")
	b.ReportMetric(ms(median(chainCPU))/steps-ms(median(startCPU)), "ms-cpu/step-overhead")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}
