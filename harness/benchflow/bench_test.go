package benchflow_test

import (
	"fmt"
	"io"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/harness/benchflow"
)

// noLimit lets the argo target write WorkflowTemplates of any size, which
// the benchmarks measure at every size.
var noLimit = compile.Options{Config: compile.Config{ArgoMaxBytes: -1}}

// BenchmarkCompile compiles each generated flow (shape × size) and emits it to
// each target and to all four, as `compile --target T` does. Besides time and
// allocations per compile it reports ns/step, allocs/step, the bytes of output
// per step of each file, and peak-heap-MB, the most heap in use at any moment.
func BenchmarkCompile(b *testing.B) {
	all := targets.All()
	for _, shape := range benchflow.Shapes {
		for _, n := range benchflow.Sizes {
			flow := benchflow.Flow(shape, n, benchflow.Options{})
			for _, t := range append(all, nil) {
				name, chosen := "all", all
				if t != nil {
					name, chosen = t.Name(), []emit.Target{t}
				}
				b.Run(fmt.Sprintf("%s/%d/%s", shape, n, name), func(b *testing.B) {
					benchmarkCompile(b, n, func(create emit.Create) {
						p, errs := compile.Compile(flow, noLimit)
						if len(errs) > 0 {
							b.Fatal(errs.ToAggregate())
						}
						for _, t := range chosen {
							if errs := t.Emit(p, create); len(errs) > 0 {
								b.Fatal(errs.ToAggregate())
							}
						}
					})
				})
			}
		}
	}
}

// BenchmarkArgoSingleNode emits a 1,000-step chain without multi-node steps to
// Argo, reporting the bytes of WorkflowTemplate per step.
func BenchmarkArgoSingleNode(b *testing.B) {
	const n = 1000
	p, errs := compile.Compile(benchflow.Flow(benchflow.Chain, n, benchflow.Options{SingleNode: true}), compile.Options{})
	if len(errs) > 0 {
		b.Fatal(errs.ToAggregate())
	}
	benchmarkCompile(b, n, func(create emit.Create) {
		if errs := (argo.Target{}).Emit(p, create); len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
	})
}

// benchmarkCompile runs run, which emits the files of an n-step flow to create
// as compile -o does, and reports per-step figures: ns/step, allocs/step,
// <file>-bytes/step for each file (named by what follows the flow's name, as
// argo.yaml), and peak-heap-MB. The files are counted and thrown away as they
// are written, so what the heap holds is what the emitters hold.
func benchmarkCompile(b *testing.B, n int, run func(emit.Create)) {
	b.ReportAllocs()
	stop := samplePeakHeap()
	allocs := readMetric(allocsMetric)
	var sizes map[string]*counter
	for b.Loop() {
		sizes = map[string]*counter{}
		run(func(name string) (io.Writer, error) {
			c := new(counter)
			sizes[name] = c
			return c, nil
		})
	}
	allocs = readMetric(allocsMetric) - allocs
	peak := stop()
	steps := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/steps, "ns/step")
	b.ReportMetric(float64(allocs)/steps, "allocs/step")
	for name, c := range sizes {
		_, kind, _ := strings.Cut(name, ".")
		b.ReportMetric(float64(*c)/float64(n), kind+"-bytes/step")
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

// counter is a writer that keeps only the number of bytes written to it.
type counter int64

func (c *counter) Write(p []byte) (int, error) {
	*c += counter(len(p))
	return len(p), nil
}

const (
	allocsMetric = "/gc/heap/allocs:objects"
	heapMetric   = "/memory/classes/heap/objects:bytes"
)

func readMetric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// samplePeakHeap samples the bytes of live and not yet swept heap objects every
// millisecond until the function it returns is called, which returns the most seen.
func samplePeakHeap() func() uint64 {
	var (
		peak uint64
		wg   sync.WaitGroup
	)
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, readMetric(heapMetric))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}
