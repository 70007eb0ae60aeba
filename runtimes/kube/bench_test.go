package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// BenchmarkStepLatency measures, on the simulated cluster, the time from a step's
// Job succeeding to the next step's Job being created, as a watch of its own sees
// both: the Job's Complete condition appearing, and the successor's Job added.
// It reports the median and the 90th percentile over every step of every run.
func BenchmarkStepLatency(b *testing.B) {
	c := simcluster.Shared(b)
	ns := c.Namespace(b)
	const steps = 10
	p := compileFlow(b, testflows.Chain(steps))
	var gaps []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i)
		ctx, cancel := context.WithCancel(context.Background())
		w, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
		if err != nil {
			b.Fatal(err)
		}
		added, complete := map[string]time.Time{}, map[string]time.Time{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				j, ok := ev.Object.(*batchv1.Job)
				if !ok {
					continue
				}
				now, step := time.Now(), j.Labels[plan.LabelStep]
				if _, seen := added[step]; !seen {
					added[step] = now
				}
				for _, cond := range j.Status.Conditions {
					if _, seen := complete[step]; !seen && cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
						complete[step] = now
					}
				}
			}
		}()
		o := options(c, ns, b.TempDir())
		o.RunID = id
		if _, err := kube.Run(ctx, p, o); err != nil {
			b.Fatal(err)
		}
		cancel()
		w.Stop()
		<-done
		for s := 1; s < steps; s++ {
			prev, next := testflows.ChainStep(s-1), testflows.ChainStep(s)
			if complete[prev].IsZero() || added[next].IsZero() {
				b.Fatalf("run %s: the watch missed %s completing or %s being created", id, prev, next)
			}
			gaps = append(gaps, added[next].Sub(complete[prev]))
		}
	}
	b.StopTimer()
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "ms-median-to-successor")
	b.ReportMetric(float64(gaps[len(gaps)*9/10].Microseconds())/1000, "ms-p90-to-successor")
}

// BenchmarkRealNodeStep measures a chain of trivial steps (busybox `true`) that
// run in real containers on a real node: per step, from its Job being created to
// its Job's Complete condition (the pod made, its container started and exited),
// and from that to the successor's Job being created, as a watch of its own sees
// them; and the whole step, Job created to successor's Job created. Medians over
// every step of every run.
func BenchmarkRealNodeStep(b *testing.B) {
	c := simcluster.Shared(b)
	c.RealNode(b)
	ns := c.Namespace(b)
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		b.Fatal(err)
	}
	busybox, err := simcluster.BusyboxImage(nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := reg.Push(ctx, "busybox:1.37", busybox); err != nil {
		b.Fatal(err)
	}
	const steps = 5
	f := sdk.NewFlow("real-chain", sdk.Image("busybox:1.37"), sdk.CPU("10m"), sdk.Memory("16Mi"),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "true", "NoSchedule"))
	for s := range steps {
		opts := []sdk.StepOption{sdk.Command("true")}
		if s > 0 {
			opts = append(opts, sdk.After(fmt.Sprintf("s%d", s-1)))
		}
		f = f.Step(fmt.Sprintf("s%d", s), opts...)
	}
	p := compileFlow(b, f)
	var toComplete, toSuccessor, perStep []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("real-bench-%d-%d", time.Now().UnixNano(), i)
		ctx, cancel := context.WithCancel(context.Background())
		w, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
		if err != nil {
			b.Fatal(err)
		}
		added, complete := map[string]time.Time{}, map[string]time.Time{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				j, ok := ev.Object.(*batchv1.Job)
				if !ok {
					continue
				}
				now, step := time.Now(), j.Labels[plan.LabelStep]
				if _, seen := added[step]; !seen {
					added[step] = now
				}
				for _, cond := range j.Status.Conditions {
					if _, seen := complete[step]; !seen && cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
						complete[step] = now
					}
				}
			}
		}()
		o := options(c, ns, b.TempDir())
		o.RunID = id
		if _, err := kube.Run(ctx, p, o); err != nil {
			b.Fatal(err)
		}
		cancel()
		w.Stop()
		<-done
		for s := range steps {
			step := fmt.Sprintf("s%d", s)
			if added[step].IsZero() || complete[step].IsZero() {
				b.Fatalf("run %s: the watch missed %s being created or completing", id, step)
			}
			toComplete = append(toComplete, complete[step].Sub(added[step]))
			if s+1 < steps {
				next := fmt.Sprintf("s%d", s+1)
				toSuccessor = append(toSuccessor, added[next].Sub(complete[step]))
				perStep = append(perStep, added[next].Sub(added[step]))
			}
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	b.ReportMetric(median(perStep), "ms-per-step")
	b.ReportMetric(median(toComplete), "ms-created-to-complete")
	b.ReportMetric(median(toSuccessor), "ms-complete-to-successor")
}
