package argo_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/sdk"
)

// wideFlow is a chain of n Trainium steps, each after the one before: the same
// flow the Job target's benchmark emits.
func wideFlow(n int) *sdk.Flow {
	f := sdk.NewFlow("bench", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule"))
	for i := range n {
		opts := []sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"),
			sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(time.Hour), sdk.SharedMemory("64Gi")}
		if i > 0 {
			opts = append(opts, sdk.After(fmt.Sprintf("s%d", i-1)))
		}
		f.Step(fmt.Sprintf("s%d", i), opts...)
	}
	return f
}

// BenchmarkEmit100 emits a compiled 100-step flow, reporting the bytes of YAML per
// step (the goal is at most 1.5 KB).
func BenchmarkEmit100(b *testing.B) {
	const steps = 100
	p := mustCompile(b, wideFlow(steps))
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
