package airflow_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/sdk"
)

// BenchmarkEmit100 emits a 100-step Trainium flow, every tenth step a foreach
// over four items, reporting the bytes of Python and of JSON per step.
func BenchmarkEmit100(b *testing.B) { benchmarkEmit(b, 1) }

// BenchmarkEmit100MultiNode is BenchmarkEmit100 with every step on 4 nodes: a Job
// task and its two Service tasks per step.
func BenchmarkEmit100MultiNode(b *testing.B) { benchmarkEmit(b, 4) }

func benchmarkEmit(b *testing.B, nodes int) {
	const steps = 100
	f := sdk.NewFlow("bench", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule"))
	for i := range steps {
		opts := []sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"),
			sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(time.Hour), sdk.SharedMemory("64Gi"), sdk.Nodes(nodes)}
		if i > 0 {
			opts = append(opts, sdk.After(fmt.Sprintf("s%d", i-1)))
		}
		if i%10 == 0 {
			opts = append(opts, sdk.Foreach("a", "b", "c", "d"))
		}
		f.Step(fmt.Sprintf("s%d", i), opts...)
	}
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		b.Fatal(errs)
	}
	b.ReportAllocs()
	var py, js int
	for b.Loop() {
		files, errs := emit.Files(airflow.Target{}, p)
		if len(errs) > 0 {
			b.Fatal(errs)
		}
		py, js = len(files[0].Data), len(files[1].Data)
	}
	b.ReportMetric(float64(py)/steps, "py-bytes/step")
	b.ReportMetric(float64(js)/steps, "json-bytes/step")
}
