package kube_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
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
// pod succeeding to the next step's Job being created, as watches of its own see
// both. It reports the median and the 90th percentile over every step of every
// run.
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
		added, succeeded := watchSteps(b, c, ns, id)
		o := options(c, ns, b.TempDir())
		o.RunID = id
		if _, err := kube.Run(context.Background(), p, o); err != nil {
			b.Fatal(err)
		}
		a, done := added(), succeeded()
		for s := 1; s < steps; s++ {
			prev, next := testflows.ChainStep(s-1), testflows.ChainStep(s)
			if done[prev].IsZero() || a[next].IsZero() {
				b.Fatalf("run %s: the watches missed %s succeeding or %s being created", id, prev, next)
			}
			gaps = append(gaps, a[next].Sub(done[prev]))
		}
	}
	b.StopTimer()
	slices.Sort(gaps)
	b.ReportMetric(float64(gaps[len(gaps)/2].Microseconds())/1000, "ms-median-to-successor")
	b.ReportMetric(float64(gaps[len(gaps)*9/10].Microseconds())/1000, "ms-p90-to-successor")
}

// watchSteps watches the Jobs and pods of run id in namespace ns until b ends.
// Once the run is over, added returns when each step's Job was first seen and
// succeeded when its pod was first seen with its containers exited (or
// succeeded); each stops the watches.
func watchSteps(b *testing.B, c *simcluster.Cluster, ns, id string) (added, succeeded func() map[string]time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	sel := metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id}
	jw, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, sel)
	if err != nil {
		b.Fatal(err)
	}
	pw, err := c.Client.CoreV1().Pods(ns).Watch(ctx, sel)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	jobs, pods := map[string]time.Time{}, map[string]time.Time{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev := range jw.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				mu.Lock()
				if step := j.Labels[plan.LabelStep]; jobs[step].IsZero() {
					jobs[step] = time.Now()
				}
				mu.Unlock()
			}
		}
	}()
	go func() {
		defer wg.Done()
		for ev := range pw.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			exited := p.Status.Phase == corev1.PodSucceeded
			for _, cs := range p.Status.ContainerStatuses {
				exited = exited || cs.State.Terminated != nil
			}
			mu.Lock()
			if step := p.Labels[plan.LabelStep]; exited && pods[step].IsZero() {
				pods[step] = time.Now()
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			jw.Stop()
			pw.Stop()
			wg.Wait()
		})
	}
	b.Cleanup(stop)
	return func() map[string]time.Time { stop(); return jobs }, func() map[string]time.Time { stop(); return pods }
}

// BenchmarkRealNodeStep measures a chain of trivial steps (busybox `true`) that
// run in real containers on a real node, as watches of its own see them: per
// step, from its Job being created to its container having exited, from that to
// the successor's Job being created, and the whole step (Job created to the
// successor's Job created). Medians over every step of every run.
func BenchmarkRealNodeStep(b *testing.B) {
	c := simcluster.Shared(b)
	c.RealNode(b)
	ns := c.Namespace(b)
	c.PushBusybox(b, "busybox:1.37")
	const steps = 5
	f := realNodeFlow("real-chain", sdk.Memory("16Mi"))
	for s := range steps {
		opts := []sdk.StepOption{sdk.Command("true")}
		if s > 0 {
			opts = append(opts, sdk.After(fmt.Sprintf("s%d", s-1)))
		}
		f = f.Step(fmt.Sprintf("s%d", s), opts...)
	}
	p := compileFlow(b, f)
	var toExited, toSuccessor, perStep []time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := fmt.Sprintf("real-bench-%d-%d", time.Now().UnixNano(), i)
		watchedAdded, watchedExited := watchSteps(b, c, ns, id)
		o := options(c, ns, b.TempDir())
		o.RunID = id
		if _, err := kube.Run(context.Background(), p, o); err != nil {
			b.Fatal(err)
		}
		added, exited := watchedAdded(), watchedExited()
		for s := range steps {
			step := fmt.Sprintf("s%d", s)
			if added[step].IsZero() || exited[step].IsZero() {
				b.Fatalf("run %s: the watches missed %s being created or its container exiting", id, step)
			}
			toExited = append(toExited, exited[step].Sub(added[step]))
			if s+1 < steps {
				next := fmt.Sprintf("s%d", s+1)
				toSuccessor = append(toSuccessor, added[next].Sub(exited[step]))
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
	b.ReportMetric(median(toExited), "ms-created-to-exited")
	b.ReportMetric(median(toSuccessor), "ms-exited-to-successor")
}
