package compile_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

// FuzzCompile builds a two-step flow from fuzzed names, counts, instance type,
// quantities, schedule and env name, and checks that Compile never panics, returns a
// plan or errors (never both, never neither), gives every error a type and a path,
// and is deterministic.
func FuzzCompile(f *testing.F) {
	type seed struct {
		flow, step, after, instance, cpu, memory, cron, env, resource string
		trainium, inferentia, efa, gpu                                int
		count                                                         int64
		run, efaAll                                                   bool
	}
	for _, s := range []seed{
		{"neuron-train", "train", "prepare", "trn1.32xlarge", "4", "16Gi", "0 3 * * *", "EPOCHS", "example.com/fpga", 16, 0, 8, 0, 1, false, false},
		{"serve", "answer", "", "inf2.xlarge", "500m", "1Gi", "@daily", "MODEL", "", 0, 1, 0, 0, 0, true, false},
		{"gpu", "train", "prepare", "p5.48xlarge", "0.5", "", "", "X", "nvidia.com/gpu", 0, 0, 0, 8, 8, false, true},
		{"Bad_Name", "Bad_Step", "nope", "trn9.huge", "abc", "-1", "61 * * * *", "MANIFOLD_X", "cpu", -1, -1, -1, -1, -1, true, true},
		{"f", "f", "f", "", "", "", "TZ=UTC", "", "aws.amazon.com/neuron", 17, 17, 33, 9, 4, false, false},
		{"", "", "", "trn1.32xlarge", "1e400", "9223372036854775807", "CRON_TZ=", "A=B", "aws.amazon.com/neuroncore", 0, 0, 0, 0, 0, false, true},
		{"a", "prepare", "prepare", "inf2.xlarge", "1", "1", "*/0 * * * *", "1", "vpc.amazonaws.com/efa", 1 << 40, 0, 1 << 40, 0, 1 << 62, true, false},
	} {
		f.Add(s.flow, s.step, s.after, s.instance, s.cpu, s.memory, s.cron, s.env, s.resource,
			s.trainium, s.inferentia, s.efa, s.gpu, s.count, s.run, s.efaAll)
	}
	f.Fuzz(func(t *testing.T, flowName, stepName, after, instance, cpu, memory, cron, env, resource string,
		trainium, inferentia, efa, gpu int, count int64, run, efaAll bool) {
		build := func() *sdk.Flow {
			flowOpts := []sdk.FlowOption{sdk.Image(img), sdk.Param("epochs", "3")}
			if cron != "" {
				flowOpts = append(flowOpts, sdk.Schedule(cron))
			}
			step := []sdk.StepOption{sdk.Env(env, "v")}
			if after != "" {
				step = append(step, sdk.After(after))
			}
			if cpu != "" {
				step = append(step, sdk.CPU(cpu))
			}
			if memory != "" {
				step = append(step, sdk.Memory(memory))
			}
			if run {
				step = append(step, sdk.Run(func(*sdk.Context) error { return nil }))
			} else {
				step = append(step, sdk.Command("true"))
			}
			if instance != "" {
				step = append(step, sdk.InstanceType(instance))
			}
			if trainium != 0 {
				step = append(step, sdk.Trainium(trainium))
			}
			if inferentia != 0 {
				step = append(step, sdk.Inferentia(inferentia))
			}
			if efaAll {
				step = append(step, sdk.EFAAll())
			} else if efa != 0 {
				step = append(step, sdk.EFA(efa))
			}
			step = append(step, sdk.GPU(gpu))
			if resource != "" {
				step = append(step, sdk.Resource(resource, count))
			}
			return sdk.NewFlow(flowName, flowOpts...).
				Step("prepare", sdk.Command("true")).
				Step(stepName, step...)
		}
		opts := compile.Options{Params: map[string]string{"epochs": env}}

		p1, errs1 := compile.Compile(build(), opts)
		if (p1 == nil) == (len(errs1) == 0) {
			t.Fatalf("Compile returned plan %v and %d errors; want exactly one of them", p1 != nil, len(errs1))
		}
		for _, e := range errs1 {
			if e == nil || e.Type == "" || e.Field == "" {
				t.Fatalf("error without a type or path: %#v", e)
			}
		}
		p2, errs2 := compile.Compile(build(), opts)
		if !cmp.Equal(p1, p2, cmpopts.EquateEmpty()) {
			t.Fatalf("two compiles of one flow differ:\n%s", cmp.Diff(p1, p2, cmpopts.EquateEmpty()))
		}
		if !cmp.Equal(errs1, errs2) {
			t.Fatalf("two compiles of one flow give different errors:\n%s", cmp.Diff(errs1, errs2))
		}
	})
}
