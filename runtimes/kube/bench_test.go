package kube_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manifoldflow/manifold/emit/argo"
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
		times := watchSteps(b, c, ns, plan.LabelRun+"="+id)
		o := options(c, ns, b.TempDir())
		o.RunID = id
		if _, err := kube.Run(context.Background(), p, o); err != nil {
			b.Fatal(err)
		}
		st := times()
		a, done := st.jobs, st.exited
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

// BenchmarkRunAtScale runs, with run --kube on the simulated cluster's kwok
// nodes, a fan-out of 1,000 independent steps and a chain of 100, with the
// default client limits, and reports steps a second end to end (the run, from
// its start to its end, objects cleaned up included) and the process's peak
// heap in use while it ran (sampled every 10 ms).
func BenchmarkRunAtScale(b *testing.B) {
	c := simcluster.Shared(b)
	for _, tc := range []struct {
		name string
		f    *sdk.Flow
	}{{"fan-out-1000", testflows.FanOut(1000)}, {"chain-100", testflows.Chain(100)}} {
		b.Run(tc.name, func(b *testing.B) {
			ns := c.Namespace(b)
			p := compileFlow(b, tc.f)
			var peak uint64
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				goruntime.GC()
				stop := make(chan struct{})
				sampled := make(chan uint64)
				go func() {
					var m goruntime.MemStats
					var top uint64
					tick := time.NewTicker(10 * time.Millisecond)
					defer tick.Stop()
					for {
						goruntime.ReadMemStats(&m)
						top = max(top, m.HeapInuse)
						select {
						case <-stop:
							sampled <- top
							return
						case <-tick.C:
						}
					}
				}()
				o := options(c, ns, b.TempDir())
				o.RunID = fmt.Sprintf("scale-%d-%d", time.Now().UnixNano(), i)
				_, err := kube.Run(context.Background(), p, o)
				close(stop)
				peak = max(peak, <-sampled)
				if err != nil {
					b.Fatal(err)
				}
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(len(p.Steps)*b.N)/elapsed.Seconds(), "steps/s")
			b.ReportMetric(float64(peak)/(1<<20), "MiB-peak-heap")
		})
	}
}

// stepTimes is when watches of their own first saw, per step, its Job, its pod
// and its pod with its containers exited (or succeeded).
type stepTimes struct {
	jobs, pods, exited map[string]time.Time
}

// watchSteps watches the Jobs and pods that selector picks in namespace ns
// until b ends. Once the run is over, times stops the watches and returns what
// they saw.
func watchSteps(b *testing.B, c *simcluster.Cluster, ns, selector string) (times func() stepTimes) {
	ctx, cancel := context.WithCancel(context.Background())
	sel := metav1.ListOptions{LabelSelector: selector}
	jw, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, sel)
	if err != nil {
		b.Fatal(err)
	}
	pw, err := c.Client.CoreV1().Pods(ns).Watch(ctx, sel)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	st := stepTimes{jobs: map[string]time.Time{}, pods: map[string]time.Time{}, exited: map[string]time.Time{}}
	first := func(m map[string]time.Time, step string) {
		if m[step].IsZero() {
			m[step] = time.Now()
		}
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev := range jw.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				mu.Lock()
				first(st.jobs, j.Labels[plan.LabelStep])
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
				exited = exited || cs.Name == plan.ContainerName && cs.State.Terminated != nil
			}
			mu.Lock()
			step := p.Labels[plan.LabelStep]
			first(st.pods, step)
			if exited {
				first(st.exited, step)
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
	return func() stepTimes { stop(); return st }
}

// BenchmarkRealNodeStep measures a chain of trivial steps (busybox `true`) that
// run in real containers on a real node, as watches of its own see them, run
// three ways: by run --kube as Jobs ("job") and as JobSets ("jobset"), and as
// the argo target's WorkflowTemplate under Argo's workflow-controller and
// executor ("argo"). A step begins when its first object is created (its Job,
// the JobSet's Job; under Argo, which makes pods itself, its pod). Per step: from that to its container having
// exited, from that to the successor beginning, and the whole step (begun to
// the successor begun). Medians over every step of every run. Argo's pods run
// in the node's network (host_network), where its executor reaches the API
// server; the Jobs' pods have network namespaces of their own, which take
// longer to make, so the comparison leans Argo's way. 64Mi of memory: Argo's
// executor runs in the step's container, around its command.
func BenchmarkRealNodeStep(b *testing.B) {
	c := simcluster.Shared(b)
	c.RealNode(b)
	c.PushBusybox(b, "busybox:1.37")
	const steps = 5
	chain := func(opts ...sdk.FlowOption) *plan.Flow {
		f := realNodeFlow("real-chain", append([]sdk.FlowOption{sdk.Memory("64Mi")}, opts...)...)
		for s := range steps {
			opts := []sdk.StepOption{sdk.Command("true")}
			if s > 0 {
				opts = append(opts, sdk.After(fmt.Sprintf("s%d", s-1)))
			}
			f = f.Step(fmt.Sprintf("s%d", s), opts...)
		}
		return compileFlow(b, f)
	}
	// measure runs the chain b.N times with run, which runs it as id, and
	// reports the medians; begun picks when a step began.
	measure := func(b *testing.B, ns string, run func(id string), begun func(stepTimes) map[string]time.Time) {
		var toExited, toSuccessor, perStep []time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			id := fmt.Sprintf("real-bench-%d-%d", time.Now().UnixNano(), i)
			times := watchSteps(b, c, ns, plan.LabelFlow+"=real-chain,"+plan.LabelRun+"="+id)
			run(id)
			st := times()
			added, exited := begun(st), st.exited
			for s := range steps {
				step := fmt.Sprintf("s%d", s)
				if added[step].IsZero() || exited[step].IsZero() {
					b.Fatalf("run %s: the watches missed %s beginning or its container exiting", id, step)
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
		b.ReportMetric(median(toExited), "ms-begun-to-exited")
		b.ReportMetric(median(toSuccessor), "ms-exited-to-successor")
	}
	for _, as := range []string{"job", "jobset"} {
		b.Run(as, func(b *testing.B) {
			ns := c.Namespace(b)
			p := chain()
			measure(b, ns, func(id string) {
				o := options(c, ns, b.TempDir())
				o.RunID, o.As = id, as
				if _, err := kube.Run(context.Background(), p, o); err != nil {
					b.Fatal(err)
				}
			}, func(st stepTimes) map[string]time.Time { return st.jobs })
		})
	}
	b.Run("argo", func(b *testing.B) {
		ns := c.Namespace(b)
		c.ArgoExecutor(b, ns)
		ctx := context.Background()
		objs, errs := argo.Objects(chain(sdk.HostNetwork(true)))
		if len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
		var template string
		for _, o := range objs {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				b.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: u}
			if _, err := c.Create(ctx, obj, ns); err != nil {
				b.Fatal(err)
			}
			if obj.GetKind() == "WorkflowTemplate" {
				template = obj.GetName()
			}
		}
		measure(b, ns, func(id string) { runArgo(b, c, ns, template, id) },
			func(st stepTimes) map[string]time.Time { return st.pods })
	})
}

// runArgo submits a Workflow named id from WorkflowTemplate template in ns, its
// pods labelled as a run --kube run's (manifold.dev/run: id), and returns once
// Argo's controller has ended it; a Workflow that did not succeed fails b.
func runArgo(b *testing.B, c *simcluster.Cluster, ns, template, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	wf, err := c.RunWorkflow(ctx, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"name": id},
		"spec": map[string]any{
			"workflowTemplateRef": map[string]any{"name": template},
			"podMetadata":         map[string]any{"labels": map[string]any{plan.LabelRun: id}},
		},
	}})
	if err != nil {
		b.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase"); phase != "Succeeded" {
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		b.Fatalf("Workflow %s ended %s: %s", id, phase, msg)
	}
}
