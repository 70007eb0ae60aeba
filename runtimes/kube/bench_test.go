package kube_test

import (
	"context"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
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
// nodes and the default client limits, the load flows: fan-outs of 100 and
// 1,000 independent steps, chains of 20, 100 and 1,000 steps, and one step of
// 10,000 foreach items. Each reports the run's wall time end to end (dry run, the
// run, and its objects cleaned up), steps (foreach items) a second, the
// process's peak memory while it ran (sampled every 10 ms through
// runtime/metrics: the heap's objects and unused spans, and all the memory the
// Go runtime holds from the system less what it has returned), and the
// requests it made to the API server, in all and per step. A chain also
// reports, per step, the medians from a Job's creation to its pod's, from
// that to the pod having exited, and from that to the next Job's creation.
//
// The fan-out and the chains then run as the argo target's WorkflowTemplate
// under Argo's controller on the same cluster (the largest that fits in
// argo_max_bytes, when the whole flow does not: argo-steps says how many), and
// report its wall time (from the Workflow's creation to its end, which does
// not count deleting its pods) and the ratio of Manifold's steps a second to
// Argo's: end to end, and to the last step's end (s-to-last-step, from the run's
// record: the dry run included, the cleanup not), which is what Argo's wall
// time counts.
//
// The 10,000 items run as one Indexed Job; after the run, the benchmark
// creates that Job (and the ConfigMap of its items) directly, with no runner,
// and reports how fast the cluster's Job controller itself ends its items
// (job-controller-items/s, jobControllerBound) at the controller manager's
// client limit (controller-manager-qps), and the run's rate to its last step
// against it (manifold/job-controller). foreach-10000-stock runs them again on
// a cluster of their own whose control plane keeps its stock limits.
//
// The flows run on a cluster of their own, sized for load (loadCluster). While
// run --kube runs, each flow also reports the processor time the cluster's
// components used (cpu-s-NAME) and logs the API server's requests by kind with
// their mean time (apiserver_request_duration_seconds), as what bounds the rate.
func BenchmarkRunAtScale(b *testing.B) {
	var load *simcluster.Cluster
	for _, tc := range []struct {
		name string
		f    func(n int) *sdk.Flow
		n    int
		argo bool
		// stock runs the flow on a cluster of its own whose control plane
		// keeps its stock limits (the Job controller's 20 requests a second)
		// rather than on the load cluster.
		stock bool
	}{
		{"fan-out-100", testflows.FanOut, 100, true, false},
		{"fan-out-1000", testflows.FanOut, 1000, true, false},
		{"chain-20", testflows.Chain, 20, true, false},
		{"chain-100", testflows.Chain, 100, true, false},
		{"chain-1000", testflows.Chain, 1000, true, false},
		{"foreach-10000", foreachFlow, 10000, false, false},
		{"foreach-10000-stock", foreachFlow, 10000, false, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cp := loadCluster.ControlPlane
			var c *simcluster.Cluster
			if tc.stock {
				cp = simcluster.ControlPlane{}
				c = simcluster.Dedicated(b, simcluster.Options{ArgoMinimalCRDs: true})
			} else {
				if load == nil {
					load = simcluster.Dedicated(b, loadCluster)
				}
				c = load
			}
			ns := c.Namespace(b)
			p := compileFlow(b, tc.f(tc.n))
			chain := len(p.Steps) > 1 && len(p.Steps[1].After) > 0
			var peak memPeak
			var wall, toDone time.Duration
			reqs := &kube.Requests{}
			var toPod, toExited, toNext []time.Duration
			cpu := map[string]time.Duration{}
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("scale-%d-%d", time.Now().UnixNano(), i)
				var times func() stepTimes
				if chain {
					times = watchSteps(b, c, ns, plan.LabelRun+"="+id)
				}
				o := options(c, ns, b.TempDir())
				o.RunID, o.Requests = id, reqs
				o.CleanupTimeout = 10 * time.Minute
				stop := samplePeak(&peak)
				cpu0, api0 := clusterCPU(b, c), apiRequests(b, c)
				start := time.Now()
				_, err := kube.Run(context.Background(), p, o)
				wall += time.Since(start)
				stop()
				if err != nil {
					b.Fatal(err)
				}
				for name, d := range clusterCPU(b, c) {
					cpu[name] += d - cpu0[name]
				}
				api := apiRequests(b, c).Since(api0)
				all := api.Total()
				b.Logf("API server, during the run: %d requests (not watches), mean %s; %s", all.Count, all.Mean().Round(100*time.Microsecond), api)
				// The record's start and end: the run from its start (the dry
				// run included) to its last step's end, before the cleanup.
				rec, tasks, err := record.Read(o.Root, id)
				if err != nil {
					b.Fatal(err)
				}
				toDone += rec.End.Sub(rec.Start)
				logPhases(b, rec.Start, rec.End, start.Add(time.Since(start)), tasks)
				if chain {
					st := times()
					for s := range len(p.Steps) {
						step := testflows.ChainStep(s)
						toPod = append(toPod, st.pods[step].Sub(st.jobs[step]))
						toExited = append(toExited, st.exited[step].Sub(st.pods[step]))
						if s+1 < len(p.Steps) {
							toNext = append(toNext, st.jobs[testflows.ChainStep(s+1)].Sub(st.exited[step]))
						}
					}
				}
			}
			b.StopTimer()
			units := float64(tc.n * b.N)
			b.ReportMetric(wall.Seconds()/float64(b.N), "s-wall")
			b.ReportMetric(toDone.Seconds()/float64(b.N), "s-to-last-step")
			b.ReportMetric(units/wall.Seconds(), "steps/s")
			b.ReportMetric(float64(peak.heap)/(1<<20), "MiB-peak-heap")
			b.ReportMetric(float64(peak.total)/(1<<20), "MiB-peak-total")
			b.ReportMetric(float64(reqs.Total())/float64(b.N), "requests")
			b.ReportMetric(float64(reqs.Total())/units, "requests/step")
			for _, name := range loadComponents {
				b.ReportMetric(cpu[name].Seconds()/float64(b.N), "cpu-s-"+name)
			}
			b.Logf("cluster processor time during the run: %v", cpu)
			b.Logf("run --kube: %.1f s to the last step's end, %.1f s wall, %.2f steps/s, peak heap %.1f MiB, peak total %.1f MiB; requests: %s",
				toDone.Seconds()/float64(b.N), wall.Seconds()/float64(b.N), units/wall.Seconds(), float64(peak.heap)/(1<<20), float64(peak.total)/(1<<20), reqs)
			if chain {
				b.ReportMetric(medianMs(toPod), "ms-job-to-pod")
				b.ReportMetric(medianMs(toExited), "ms-pod-to-exited")
				b.ReportMetric(medianMs(toNext), "ms-exited-to-next-job")
			}
			if len(p.Steps) == 1 && p.Steps[0].Foreach != nil && os.Getenv(envSkipBound) == "" {
				qps := cp.ControllerQPS
				if qps == 0 {
					qps = 20 // kube-controller-manager's stock --kube-api-qps
				}
				bound := jobControllerBound(b, c, ns, p)
				b.ReportMetric(qps, "controller-manager-qps")
				b.ReportMetric(float64(tc.n)/bound.Seconds(), "job-controller-items/s")
				b.ReportMetric((units/toDone.Seconds())/(float64(tc.n)/bound.Seconds()), "manifold/job-controller")
				b.Logf("the Job controller alone: %d items in %.1f s (%.1f items/s), the controller manager at %g requests a second",
					tc.n, bound.Seconds(), float64(tc.n)/bound.Seconds(), qps)
			}
			if !tc.argo {
				return
			}
			n, template := argoTemplate(b, c, ns, tc.f, tc.n)
			var argoWall time.Duration
			const timeout = 15 * time.Minute
			for i := range b.N {
				took, failed := runArgoFor(b, c, ns, template, fmt.Sprintf("argo-%d-%d", time.Now().UnixNano(), i), timeout)
				if failed != "" {
					// Argo's own limits (its Workflow's status must fit in one
					// object unless offloaded to a database) are a finding, not
					// the benchmark's failure.
					b.Logf("Argo did not run the %d steps: %s; no Argo figures", n, failed)
					return
				}
				argoWall += took
			}
			b.ReportMetric(float64(n), "argo-steps")
			b.ReportMetric(argoWall.Seconds()/float64(b.N), "argo-s-wall")
			argoRate := float64(n*b.N) / argoWall.Seconds()
			b.ReportMetric((units/wall.Seconds())/argoRate, "manifold/argo-steps/s")
			b.ReportMetric((units/toDone.Seconds())/argoRate, "manifold/argo-to-last-step")
		})
	}
}

// logPhases logs where a run's time went, from its record: from its start to
// the first task's start (the dry run and the first create), from there to
// the last task's start (creating the rest), from there to the last task's end,
// and from the record's end to the run's return (the cleanup).
func logPhases(b *testing.B, start, end, returned time.Time, tasks []record.Task) {
	var first, last, lastEnd time.Time
	for _, t := range tasks {
		if first.IsZero() || t.Start.Before(first) {
			first = t.Start
		}
		if t.Start.After(last) {
			last = t.Start
		}
		if t.End.After(lastEnd) {
			lastEnd = t.End
		}
	}
	r := func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
	b.Logf("phases: %s to the first task's start, %s to the last's, %s to the last end, %s cleanup",
		r(first.Sub(start)), r(last.Sub(first)), r(lastEnd.Sub(last)), r(returned.Sub(end)))
}

// loadCluster is the cluster the load flows run on: a control plane sized for
// load (simcluster.LoadControlPlane: the controller manager's and the
// scheduler's client limits and the Job and garbage-collector workers), and
// Argo's minimal CRDs, which its install applies. The runner keeps its own
// default client limits.
var loadCluster = simcluster.Options{ControlPlane: simcluster.LoadControlPlane(), ArgoMinimalCRDs: true}

// loadComponents are the cluster's components whose processor time a load
// flow reports.
var loadComponents = []string{simcluster.APIServer, simcluster.Etcd, simcluster.ControllerManager, simcluster.Scheduler, simcluster.Kwok}

// clusterCPU is the processor time each of loadComponents has used so far.
func clusterCPU(b *testing.B, c *simcluster.Cluster) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, name := range loadComponents {
		d, err := c.CPU(name)
		if err != nil {
			b.Fatal(err)
		}
		out[name] = d
	}
	return out
}

// apiRequests is what the API server has served so far.
func apiRequests(b *testing.B, c *simcluster.Cluster) simcluster.APIRequests {
	r, err := c.APIRequests(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// jobControllerBound is how fast the cluster's Job controller itself runs the
// items of p's one foreach step: the Indexed Job and ConfigMap that run --kube
// makes of it (job.FanOut), created directly, timed from the Job's creation to
// its Complete condition as a watch of the Job sees it, then deleted with
// its pods. No runner takes part: it is the bound a run's items/s is held to.
func jobControllerBound(b *testing.B, c *simcluster.Cluster, ns string, p *plan.Flow) time.Duration {
	ctx := context.Background()
	s := &p.Steps[0]
	cm, j := job.FanOut(p, s, s.Foreach, false)
	cm.Name, j.Name = "bound-"+cm.Name, "bound-"+j.Name
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil {
			v.ConfigMap.Name = cm.Name
		}
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	w, err := c.Client.BatchV1().Jobs(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + j.Name})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	timeout := time.After(30 * time.Minute)
	var took time.Duration
	for took == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.Fatal("the watch of the Job ended")
			}
			if got, ok := ev.Object.(*batchv1.Job); ok {
				for _, cond := range got.Status.Conditions {
					if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
						took = time.Since(start)
					}
					if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
						b.Fatalf("the Job failed: %s", cond.Message)
					}
				}
			}
		case <-timeout:
			b.Fatal("the Job did not complete in 30 minutes")
		}
	}
	bg := metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}
	if err := c.Client.BatchV1().Jobs(ns).Delete(ctx, j.Name, bg); err != nil {
		b.Fatal(err)
	}
	if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	return took
}

// foreachFlow is one step of n foreach items, each asking a sliver of CPU and
// memory, as FanOut's steps do.
func foreachFlow(n int) *sdk.Flow {
	items := make([]string, n)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	f := sdk.NewFlow("foreach", sdk.Image("registry.example.com/chain:v1"), sdk.CPU("1m"), sdk.Memory("1Mi"))
	f.Step("each", sdk.Command("true"), sdk.Foreach(items...))
	return f
}

// memPeak is the most memory a process held while sampled: heap is the heap's
// objects and unused spans (HeapInuse), total all the Go runtime holds from the
// system less what it has returned to it (about the resident memory).
type memPeak struct{ heap, total uint64 }

// envSkipBound, set, leaves out of BenchmarkRunAtScale the Job controller's
// bound (jobControllerBound), which does not depend on the runner and takes
// as long as the run: for measuring the runner again on a cluster whose bound
// is known.
const envSkipBound = "MANIFOLD_BENCH_SKIP_BOUND"

// envHeapProfile names a file where samplePeak writes a heap profile each time
// the heap grows a tenth past the last one written: the last is the live
// objects (as of the garbage collection before) near the peak.
const envHeapProfile = "MANIFOLD_BENCH_HEAPPROFILE"

// samplePeak samples the process's memory every 10 ms into peak, after a
// garbage collection, until stop is called.
func samplePeak(peak *memPeak) (stop func()) {
	profile := os.Getenv(envHeapProfile)
	var written uint64
	goruntime.GC()
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(samples)
			v := func(i int) uint64 { return samples[i].Value.Uint64() }
			peak.heap = max(peak.heap, v(0)+v(1))
			if profile != "" && peak.heap > written+written/10 {
				written = peak.heap
				if f, err := os.Create(profile); err == nil {
					pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
			peak.total = max(peak.total, v(2)-v(3))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-ended }
}

func medianMs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2].Microseconds()) / 1000
}

// argoTemplate creates in ns the argo target's WorkflowTemplate of flow(n), or
// of the largest flow(m), m < n, that the argo target writes as one
// WorkflowTemplate (not split into parts), and returns m and the template's
// name.
func argoTemplate(b *testing.B, c *simcluster.Cluster, ns string, flow func(int) *sdk.Flow, n int) (int, string) {
	for m := n; m > 1; m = m * 9 / 10 {
		p := compileFlow(b, flow(m))
		errs := argo.Target{}.Emit(p, func(string) (io.Writer, error) { return io.Discard, nil })
		if len(errs) > 0 {
			if m == n {
				b.Logf("argo: %d steps do not fit: %v", n, errs.ToAggregate())
			}
			continue
		}
		objs, errs := argo.Objects(p)
		if len(errs) > 0 {
			b.Fatal(errs.ToAggregate())
		}
		if slices.ContainsFunc(objs, func(o any) bool {
			wt, ok := o.(*wfv1.WorkflowTemplate)
			return ok && wt.Labels[argo.LabelPart] != ""
		}) {
			if m == n {
				b.Logf("argo: %d steps are split into parts (see the e2e test TestArgoSplitRunsFiveThousandSteps for such a run)", n)
			}
			continue
		}
		for _, o := range objs {
			u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
			if err != nil {
				b.Fatal(err)
			}
			obj := &unstructured.Unstructured{Object: u}
			if obj.GetKind() != "WorkflowTemplate" {
				continue
			}
			obj.SetName(fmt.Sprintf("%s-%d", obj.GetName(), m))
			if _, err := c.Create(context.Background(), obj, ns); err != nil {
				b.Fatalf("the API server refused the WorkflowTemplate of %d steps: %v", m, err)
			}
			return m, obj.GetName()
		}
	}
	b.Fatalf("no WorkflowTemplate of %d steps or fewer fits", n)
	return 0, ""
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

// runArgo submits a Workflow of run id (named id-…) from WorkflowTemplate
// template in ns, its pods labelled as a run --kube run's (manifold.dev/run:
// id), and returns once Argo's controller has ended it; a Workflow that did
// not succeed fails b.
func runArgo(b *testing.B, c *simcluster.Cluster, ns, template, id string) {
	if _, failed := runArgoFor(b, c, ns, template, id, 3*time.Minute); failed != "" {
		b.Fatal(failed)
	}
}

// runArgoFor is runArgo, waiting at most timeout, and returns how long the
// Workflow took from its creation to its end; or, when it did not end in time
// or did not succeed, why. A Workflow submitted before Argo's controller
// holds the template is submitted again (simcluster's RunFromTemplate), its
// time not counted.
func runArgoFor(b *testing.B, c *simcluster.Cluster, ns, template, id string, timeout time.Duration) (took time.Duration, failed string) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	wf, took, err := c.TimeFromTemplate(ctx, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata":   map[string]any{"generateName": id + "-"},
		"spec": map[string]any{
			"workflowTemplateRef": map[string]any{"name": template},
			"podMetadata":         map[string]any{"labels": map[string]any{plan.LabelRun: id}},
		},
	}})
	switch {
	case err != nil && ctx.Err() != nil:
		return 0, fmt.Sprintf("the Workflow of %s did not end in %s", id, timeout)
	case err != nil:
		b.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase"); phase != "Succeeded" {
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		return 0, fmt.Sprintf("Workflow %s ended %s: %s", wf.GetName(), phase, msg)
	}
	return took, ""
}
