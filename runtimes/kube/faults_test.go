package kube_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// faultFlow runs prep, then work's two items side by side for a while (kwok
// keeps their pods Running for runFor), then join. work's timeout is far longer
// than the run, and must not end it however long an outage lasts.
func faultFlow(runFor string) *sdk.Flow {
	return sdk.NewFlow("faults", sdk.Image("example.com/flow:v1")).
		Step("prep", sdk.Command("prep")).
		Step("work", sdk.After("prep"), sdk.Command("work"), sdk.Foreach("a", "b"),
			sdk.Label(simcluster.LabelRunFor, runFor), sdk.Timeout(10*time.Minute)).
		Step("join", sdk.After("work"), sdk.Command("join"))
}

// faultUnits are the units of faultFlow: the labels its run records.
var faultUnits = []string{"prep", "work[0]", "work[1]", "join"}

// fault is a component of the control plane damaged while a run's step runs.
type fault struct {
	name string
	// inject damages the cluster, and returns once it is whole again.
	inject func(ctx context.Context, c *simcluster.Cluster) error
	// down is whether the API server stops answering: the run says so once,
	// and once that it is back.
	down bool
}

func restartOf(component string) func(context.Context, *simcluster.Cluster) error {
	return func(ctx context.Context, c *simcluster.Cluster) error { return c.Restart(ctx, component) }
}

// TestControlPlaneFaults runs faultFlow on a cluster of its own, once without a
// fault and once under each fault of its control plane, injected while step
// work's pods run: the API server restarted, the API server down for 30
// seconds, etcd restarted, the controller manager restarted. Each run must
// succeed with every step run once (the API server's audit log counts the
// creates of each Job and pod), record one attempt of each step, and leave
// nothing labelled with the run; when the API server was down the run said so
// once, and once that it was back.
func TestControlPlaneFaults(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	startCtx, startCancel := context.WithTimeout(ctx, simcluster.StartTimeout)
	c, err := simcluster.Start(startCtx, simcluster.Options{Audit: true, ControlPlaneOnly: true, Nodes: []simcluster.NodeGroup{{InstanceType: simcluster.CPUInstanceType, Count: 2}}})
	startCancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("cluster logs:\n%s", c.LogTails(60))
		}
		c.Stop()
	}()
	p := compileFlow(t, faultFlow("10s"))

	faults := []fault{
		{name: "none"},
		{name: "apiserver-restart", inject: restartOf(simcluster.APIServer), down: true},
		{name: "apiserver-down-30s", down: true, inject: func(ctx context.Context, c *simcluster.Cluster) error {
			if err := c.StopComponent(simcluster.APIServer); err != nil {
				return err
			}
			select {
			case <-time.After(30 * time.Second):
			case <-ctx.Done():
			}
			return c.StartComponent(ctx, simcluster.APIServer)
		}},
		{name: "etcd-restart", inject: restartOf(simcluster.Etcd)},
		{name: "controller-manager-restart", inject: restartOf(simcluster.ControllerManager)},
	}
	var figures []string
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			ns := c.Namespace(t)
			o := options(c, ns, t.TempDir())
			o.RunID = "fault-" + f.name
			var injected struct {
				sync.Mutex
				at, whole time.Time
				err       error
			}
			runCtx, stopInject := context.WithCancel(ctx)
			var wg sync.WaitGroup
			if f.inject != nil {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if !waitRunning(runCtx, c, ns, o.RunID, "work") {
						return
					}
					at := time.Now()
					err := f.inject(runCtx, c)
					injected.Lock()
					injected.at, injected.whole, injected.err = at, time.Now(), err
					injected.Unlock()
				}()
			}
			start := time.Now()
			r := runFlow(t, ctx, p, o)
			took := time.Since(start)
			stopInject()
			wg.Wait()
			if f.inject != nil {
				switch {
				case injected.err != nil:
					t.Fatalf("injecting the fault: %v", injected.err)
				case injected.at.IsZero():
					t.Fatal("the fault was not injected: step work never ran")
				}
				figures = append(figures, fmt.Sprintf("%s: run %s (fault injected at +%s, cluster whole after %s)",
					f.name, took.Round(100*time.Millisecond), injected.at.Sub(start).Round(100*time.Millisecond), injected.whole.Sub(injected.at).Round(100*time.Millisecond)))
			} else {
				figures = append(figures, fmt.Sprintf("%s: run %s", f.name, took.Round(100*time.Millisecond)))
			}
			if r.err != nil {
				t.Fatalf("run failed: %v", r.err)
			}
			if r.res.State != record.Succeeded || r.rec.State != record.Succeeded {
				t.Errorf("result %s, record %s; want succeeded", r.res.State, r.rec.State)
			}
			checkFaultRecord(t, r)
			checkCreatedOnce(t, c, ns, o.RunID)
			if left := labelled(t, c, ns, o.RunID); len(left) > 0 {
				t.Errorf("left on the cluster: %v", left)
			}
			out := r.out.String()
			lost, back := strings.Count(out, "lost the API server at "), strings.Count(out, "API server back after ")
			switch {
			case f.down && (lost != 1 || back != 1):
				t.Errorf("the run said %d times that it lost the API server and %d times that it was back; want once each", lost, back)
			case !f.down && lost != back:
				t.Errorf("the run said %d times that it lost the API server, but %d times that it was back", lost, back)
			case f.name == "none" && lost > 0:
				t.Errorf("without a fault the run said it lost the API server")
			}
		})
	}

	// An outage longer than the run's limit fails the run, which leaves its
	// objects and says how to resume it; resumed once the API server is back,
	// the run finishes, creating nothing again.
	t.Run("apiserver-down-past-limit", func(t *testing.T) {
		ns := c.Namespace(t)
		o := options(c, ns, t.TempDir())
		o.RunID, o.OutageLimit = "fault-past-limit", 5*time.Second
		runCtx, stopInject := context.WithCancel(ctx)
		defer stopInject()
		stopped := make(chan error, 1)
		go func() {
			if !waitRunning(runCtx, c, ns, o.RunID, "work") {
				stopped <- errors.New("step work never ran")
				return
			}
			stopped <- c.StopComponent(simcluster.APIServer)
		}()
		start := time.Now()
		r := runFlow(t, ctx, p, o)
		failedAfter := time.Since(start)
		stopInject()
		if err := <-stopped; err != nil {
			t.Fatalf("stopping the API server: %v", err)
		}
		if err := c.StartComponent(ctx, simcluster.APIServer); err != nil {
			t.Fatal(err)
		}
		if r.res == nil || r.res.State != record.Failed || r.err == nil {
			t.Fatalf("result %+v, error %v; want the run failed by the outage", r.res, r.err)
		}
		for _, want := range []string{"lost the API server at ", "did not answer for 5s", "resume the run with --run-id"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("error %q does not say %q", r.err, want)
			}
		}
		for l, want := range map[string]record.State{"prep": record.Succeeded, "work[0]": record.Failed, "work[1]": record.Failed, "join": record.Pending} {
			if got := r.tasks[l]; got.State != want || want == record.Failed && got.Reason != "Unreachable" {
				t.Errorf("%s: recorded %s (%q); want %s", l, got.State, got.Reason, want)
			}
		}

		o.OutageLimit = 0
		start = time.Now()
		r = runFlow(t, ctx, p, o)
		figures = append(figures, fmt.Sprintf("apiserver-down-past-limit (5s): failed after %s, resumed run %s",
			failedAfter.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond)))
		if r.err != nil {
			t.Fatalf("resumed run failed: %v", r.err)
		}
		checkFaultRecord(t, r)
		if out := r.out.String(); strings.Contains(out, "retrying") || strings.Contains(out, "failed") {
			t.Errorf("the resumed run reports a failure or a retry; each step ran once")
		}
		checkCreatedOnce(t, c, ns, o.RunID)
		if left := labelled(t, c, ns, o.RunID); len(left) > 0 {
			t.Errorf("left on the cluster: %v", left)
		}
	})
	t.Logf("wall time of each run (faultFlow, work runs 10s):\n  %s", strings.Join(figures, "\n  "))
}

// checkFaultRecord checks that run r recorded each unit of faultFlow, and no other,
// as succeeded after one attempt, with a start and an end.
func checkFaultRecord(t *testing.T, r *run) {
	t.Helper()
	for _, l := range faultUnits {
		task := r.tasks[l]
		if task.State != record.Succeeded || task.Attempts != 1 {
			t.Errorf("%s: recorded %s after %d attempts; want succeeded after 1", l, task.State, task.Attempts)
		}
		if task.Start.IsZero() || task.End.Before(task.Start) {
			t.Errorf("%s: recorded start %s, end %s", l, task.Start, task.End)
		}
	}
	if len(r.tasks) != len(faultUnits) {
		t.Errorf("recorded %d units; want %d (%v)", len(r.tasks), len(faultUnits), faultUnits)
	}
}

// waitRunning waits until a pod of step of run id in namespace ns is Running,
// reporting false if ctx ends first.
func waitRunning(ctx context.Context, c *simcluster.Cluster, ns, id, step string) bool {
	sel := plan.LabelRun + "=" + id + "," + plan.LabelStep + "=" + step
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil {
			for _, p := range list.Items {
				if p.Status.Phase == corev1.PodRunning {
					return true
				}
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// checkCreatedOnce reads the API server's audit log: each Job of run id in
// namespace ns was created once (an attempt again after a create that got no
// answer is refused as existing, which is fine), one Job per step of
// faultFlow (work's two items are one Indexed Job), and its controller created
// one pod for each of its units: one pod per unit in all.
func checkCreatedOnce(t *testing.T, c *simcluster.Cluster, ns, id string) {
	t.Helper()
	creates, err := c.Creates(ns)
	if err != nil {
		t.Fatal(err)
	}
	jobs, pods := map[string]int{}, map[string]int{}
	for _, cr := range creates {
		if cr.Code != 201 || cr.DryRun {
			continue
		}
		switch cr.Resource {
		case "jobs":
			jobs[cr.Name]++
		case "pods":
			if cr.Labels[plan.LabelRun] == id {
				pods[cr.Labels[batchv1.JobNameLabel]]++
			}
		}
	}
	if len(jobs) != 3 {
		t.Errorf("the API server created %d Jobs in the run's namespace (%v); want 3, one per step", len(jobs), jobs)
	}
	all := 0
	for name, n := range jobs {
		if n != 1 {
			t.Errorf("Job %s was created %d times; want once", name, n)
		}
		if want := 1 + strings.Count(name, "-work-"); pods[name] != want {
			t.Errorf("Job %s had %d pods created; want %d", name, pods[name], want)
		}
		all += pods[name]
	}
	if all != len(faultUnits) {
		t.Errorf("%d pods were created; want %d, one per unit", all, len(faultUnits))
	}
	for name := range pods {
		if jobs[name] == 0 {
			t.Errorf("pods were created for %q, which is no Job the run created", name)
		}
	}
}
