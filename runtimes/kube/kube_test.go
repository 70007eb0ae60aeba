package kube_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestMain runs the tests, or, started under the name of a flow of runners,
// that flow's program: the runner tests kill runs as a subprocess.
func TestMain(m *testing.M) {
	if flow, ok := runners[filepath.Base(os.Args[0])]; ok {
		cli.Main(flow)
	}
	os.Exit(simcluster.Main(m))
}

// syncBuffer is a bytes.Buffer safe for the runtime's writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// compileFlow compiles f, failing t on errors.
func compileFlow(t testing.TB, f *sdk.Flow) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	return p
}

// run is one run of a flow on the simulated cluster.
type run struct {
	res *kube.Result
	err error
	out *syncBuffer
	rec *record.Record
	// tasks are the recorded steps and items by label.
	tasks map[string]record.Task
}

// options returns the options of a run in namespace ns of c, recorded under root.
func options(c *simcluster.Cluster, ns, root string) kube.Options {
	return kube.Options{Kubeconfig: c.Kubeconfig, Namespace: ns, Root: root, CleanupTimeout: time.Minute}
}

// runFlow runs p with o, and reads back what the run recorded.
func runFlow(t *testing.T, ctx context.Context, p *plan.Flow, o kube.Options) *run {
	t.Helper()
	out := &syncBuffer{}
	o.Stdout, o.Stderr = out, out
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	r := &run{out: out}
	r.res, r.err = kube.Run(ctx, p, o)
	t.Logf("output of the run:\n%s", out)
	if r.res == nil {
		return r
	}
	rec, tasks, err := record.Read(o.Root, r.res.ID)
	if err != nil {
		t.Fatalf("reading the run record: %v", err)
	}
	r.rec, r.tasks = rec, map[string]record.Task{}
	for _, task := range tasks {
		r.tasks[task.Label()] = task
	}
	return r
}

// kinds are every kind of object a run creates, and the pods its controllers make.
var kinds = []schema.GroupVersionResource{
	{Group: "batch", Version: "v1", Resource: "jobs"},
	{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "pods"},
}

// labelled lists every object of namespace ns labelled with run id.
func labelled(t *testing.T, c *simcluster.Cluster, ns, id string) []string {
	t.Helper()
	var out []string
	for _, gvr := range kinds {
		list, err := c.Dynamic.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
		if apierrors.IsNotFound(err) && gvr.Group != "" {
			continue // a kind the cluster does not serve (simcluster.Options.ControlPlaneOnly)
		}
		if err != nil {
			t.Fatalf("list %s: %v", gvr.Resource, err)
		}
		for _, o := range list.Items {
			out = append(out, o.GetKind()+" "+o.GetName())
		}
	}
	return out
}

// trainFlow is a diamond: a CPU step, then a two-node Trainium step with EFA and
// a foreach step side by side, then a step that joins them.
func trainFlow() *sdk.Flow {
	return sdk.NewFlow("kube-train", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "2")).
		Step("prepare", sdk.Command("prepare")).
		Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py"),
			sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Retry(1)).
		Step("shard", sdk.After("prepare"), sdk.Command("shard"), sdk.Foreach("a", "b", "c")).
		Step("evaluate", sdk.After("train", "shard"), sdk.Command("evaluate"),
			sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1))
}

func TestRunCompletes(t *testing.T) {
	c := simcluster.Shared(t)
	for _, as := range []string{kube.AsJob, kube.AsJobSet} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			p := compileFlow(t, trainFlow())
			o := options(c, ns, t.TempDir())
			o.As = as
			r := runFlow(t, context.Background(), p, o)
			if r.err != nil {
				t.Fatalf("run failed: %v", r.err)
			}
			if r.res.State != record.Succeeded || r.rec.State != record.Succeeded {
				t.Errorf("result %s, record %s; want succeeded", r.res.State, r.rec.State)
			}
			if r.rec.Runtime != "kube" || r.rec.Namespace != ns || r.rec.As != as || r.rec.Cluster != c.Config.Host {
				t.Errorf("record: runtime %q, namespace %q, as %q, cluster %q", r.rec.Runtime, r.rec.Namespace, r.rec.As, r.rec.Cluster)
			}
			labels := []string{"prepare", "train", "shard[0]", "shard[1]", "shard[2]", "evaluate"}
			if as == kube.AsJobSet {
				labels = []string{"prepare", "train", "shard", "evaluate"}
			}
			for _, l := range labels {
				task, ok := r.tasks[l]
				if !ok || task.State != record.Succeeded {
					t.Errorf("%s: recorded %+v; want succeeded", l, task)
				}
			}
			// Each step started after every step it waits for had ended.
			for l, task := range r.tasks {
				for _, a := range p.Step(task.Step).After {
					for dl, d := range r.tasks {
						if d.Step == a && task.Start.Before(d.End) {
							t.Errorf("%s started at %s, before %s ended at %s", l, task.Start, dl, d.End)
						}
					}
				}
			}
			// The two nodes of train ran on two distinct trn1.32xlarge nodes.
			nodes := strings.Split(r.tasks["train"].Node, ",")
			if len(nodes) != 2 || nodes[0] == nodes[1] || !strings.HasPrefix(nodes[0], "trn1-32xlarge-") || !strings.HasPrefix(nodes[1], "trn1-32xlarge-") {
				t.Errorf("train ran on %q; want two distinct trn1.32xlarge nodes", r.tasks["train"].Node)
			}
			if n := r.tasks["evaluate"].Node; !strings.HasPrefix(n, "inf2-xlarge-") {
				t.Errorf("evaluate ran on %q; want an inf2.xlarge node", n)
			}
			// A run that succeeds removes what it created.
			if left := labelled(t, c, ns, r.res.ID); len(left) > 0 {
				t.Errorf("left on the cluster after success: %v", left)
			}
		})
	}
}

func TestFailureStopsDependents(t *testing.T) {
	c := simcluster.Shared(t)
	for _, as := range []string{kube.AsJob, kube.AsJobSet} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			f := sdk.NewFlow("kube-fail", sdk.Image("example.com/flow:v1")).
				Step("a", sdk.Command("a")).
				Step("b", sdk.After("a"), sdk.Command("b"), sdk.Label(simcluster.LabelFail, "true"), sdk.Retry(1)).
				Step("c", sdk.After("a"), sdk.Command("c")).
				Step("d", sdk.After("b"), sdk.Command("d"))
			o := options(c, ns, t.TempDir())
			o.As = as
			r := runFlow(t, context.Background(), compileFlow(t, f), o)
			if r.err == nil {
				t.Fatal("run succeeded; want it to fail at step b")
			}
			msg := r.err.Error()
			for _, want := range []string{"step b failed", "pod ", "Error (exit 1)", "failed by the " + simcluster.LabelFail + " label", "not started: d"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if r.res.State != record.Failed || !slices.Equal(r.res.NotStarted, []string{"d"}) {
				t.Errorf("result %s, not started %v; want failed, [d]", r.res.State, r.res.NotStarted)
			}
			want := map[string]record.State{"a": record.Succeeded, "b": record.Failed, "c": record.Succeeded, "d": record.Skipped}
			for l, st := range want {
				if got := r.tasks[l].State; got != st {
					t.Errorf("%s: %s; want %s", l, got, st)
				}
			}
			if b := r.tasks["b"]; b.Attempts != 2 || b.Reason != "Error" || b.ExitCode == nil || *b.ExitCode != 1 {
				t.Errorf("b: %d attempts, reason %q, exit %v; want 2 attempts (Retry(1)), Error, 1", b.Attempts, b.Reason, b.ExitCode)
			}
			// d was never created, and a failed run leaves its objects for inspection.
			left := labelled(t, c, ns, r.res.ID)
			for _, o := range left {
				if strings.Contains(o, "kube-fail-d-") {
					t.Errorf("d's objects were created: %s", o)
				}
			}
			if !slices.ContainsFunc(left, func(o string) bool { return strings.Contains(o, "kube-fail-b-") }) {
				t.Errorf("b's objects were removed after it failed: %v", left)
			}
		})
	}
}

// pendingFlow's second step asks 32 EFA interfaces of a trn1.32xlarge node, which
// has 8: the scheduler can never place it.
func pendingFlow(nodes int) *sdk.Flow {
	return sdk.NewFlow("kube-pending", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("a")).
		Step("big", sdk.After("a"), sdk.Command("train"), sdk.Nodes(nodes),
			sdk.NodeSelector(plan.LabelInstanceType, "trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(32))
}

func TestPendingReported(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	o := options(c, ns, t.TempDir())
	p := compileFlow(t, pendingFlow(1))

	// check predicts it, and run --kube refuses the flow before creating anything.
	const lack = "have too little vpc.amazonaws.com/efa (8 allocatable, 32 asked)"
	report, err := kube.Check(context.Background(), p, o)
	if err != nil {
		t.Fatal(err)
	}
	if report.OK || len(report.Unplaceable()) != 1 || report.Unplaceable()[0].Step != "big" || !strings.Contains(report.Unplaceable()[0].Reason, "2 "+lack) {
		t.Errorf("check: %+v; want step big unplaceable: 2 trn1.32xlarge nodes %s", report.Steps, lack)
	}
	var unplaceable *kube.UnplaceableError
	if r := runFlow(t, context.Background(), p, o); r.res != nil || !errors.As(r.err, &unplaceable) || !strings.Contains(r.err.Error(), "step big cannot be placed") {
		t.Fatalf("run: result %v, error %v; want it refused before anything is created", r.res, r.err)
	}

	// Run anyway: the real scheduler agrees.
	o.NoCheck = true
	o.PendingGrace, o.PendingTimeout = time.Second, 4*time.Second
	r := runFlow(t, context.Background(), p, o)
	if r.err == nil {
		t.Fatal("run succeeded; want step big to fail after --pending-timeout")
	}
	const reason = "Insufficient vpc.amazonaws.com/efa"
	if !strings.Contains(r.err.Error(), reason) || !strings.Contains(r.err.Error(), "step big failed") {
		t.Errorf("error %q does not name step big and %q", r.err, reason)
	}
	out := r.out.String()
	if n := strings.Count(out, "big: waiting"); n != 1 {
		t.Errorf("the pending reason was reported %d times; want once:\n%s", n, out)
	}
	if !strings.Contains(out, reason) {
		t.Errorf("output does not give the scheduler's reason %q", reason)
	}
	if got := r.tasks["big"]; got.State != record.Failed || got.Reason != "Unschedulable" {
		t.Errorf("big: %s, reason %q; want failed, Unschedulable", got.State, got.Reason)
	}
	// A step that could not start is removed, so its pods do not start later.
	for _, o := range labelled(t, c, ns, r.res.ID) {
		if strings.Contains(o, "-big-") {
			t.Errorf("left after its pending timeout: %s", o)
		}
	}
}

// interruptWhenPending cancels the run id once two pods of its step big wait for
// the scheduler.
func interruptWhenPending(t *testing.T, ctx context.Context, c *simcluster.Cluster, ns, id string, cancel context.CancelFunc) {
	sel := plan.LabelRun + "=" + id + "," + plan.LabelStep + "=big"
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Error(err)
		cancel()
		return
	}
	defer w.Stop()
	seen := map[string]bool{}
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodPending {
			if seen[p.Name] = true; len(seen) == 2 {
				cancel()
				return
			}
		}
	}
}

func TestInterruptAndResume(t *testing.T) {
	c := simcluster.Shared(t)
	for _, as := range []string{kube.AsJob, kube.AsJobSet} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			o := options(c, ns, t.TempDir())
			o.As, o.RunID, o.NoCheck = as, "interrupt-"+as, true
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go interruptWhenPending(t, ctx, c, ns, o.RunID, cancel)
			r := runFlow(t, ctx, compileFlow(t, pendingFlow(2)), o)
			if r.res == nil || r.res.State != record.Interrupted || !errors.Is(r.err, kube.ErrInterrupted) {
				t.Fatalf("result %+v, error %v; want interrupted", r.res, r.err)
			}
			if r.tasks["a"].State != record.Succeeded || r.tasks["big"].State != record.Interrupted {
				t.Errorf("a %s, big %s; want succeeded, interrupted", r.tasks["a"].State, r.tasks["big"].State)
			}
			// Every Job, JobSet, Service and pod of the run is gone.
			if left := labelled(t, c, ns, o.RunID); len(left) > 0 {
				t.Errorf("left on the cluster after the interrupt: %v", left)
			}
			if len(r.res.Left) > 0 {
				t.Errorf("the run says it left %v", r.res.Left)
			}

			// Resumed with big made schedulable, the run runs big alone: a
			// succeeded before and is not created again.
			p, errs := compile.Compile(pendingFlow(2), compile.Options{Overrides: map[string][]sdk.StepOption{"big": {sdk.EFA(8)}}})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			o.Keep = true
			r = runFlow(t, context.Background(), p, o)
			if r.err != nil {
				t.Fatalf("resumed run failed: %v", r.err)
			}
			if r.tasks["a"].State != record.Succeeded || r.tasks["big"].State != record.Succeeded {
				t.Errorf("a %s, big %s; want both succeeded", r.tasks["a"].State, r.tasks["big"].State)
			}
			left := labelled(t, c, ns, o.RunID)
			if slices.ContainsFunc(left, func(o string) bool { return strings.Contains(o, "kube-pending-a-") }) {
				t.Errorf("the resumed run created step a again: %v", left)
			}
			if !slices.ContainsFunc(left, func(o string) bool { return strings.Contains(o, "kube-pending-big-") }) {
				t.Errorf("the resumed run with --keep left no objects of big: %v", left)
			}
			if !strings.Contains(r.out.String(), "a: succeeded in an earlier attempt of this run: not run again") {
				t.Errorf("the resumed run does not say that a is not run again")
			}
		})
	}
}
