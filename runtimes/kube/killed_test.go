package kube_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/manifoldflow/manifold/harness/proctest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// runners are the flows whose programs the tests start as a subprocess, to
// kill the runner as a user's machine might: TestMain runs the flow named by
// the program's name.
var runners = map[string]*sdk.Flow{
	"killed": killedFlow(),
}

// runFor keeps a step's pods running d on the simulated cluster's fake nodes.
func runFor(d string) sdk.Option { return sdk.Label(simcluster.LabelRunFor, d) }

// killedFlow is a diamond whose steps run for a few seconds each: a step, a
// foreach step after it, a longer step beside them, and a step that joins.
func killedFlow() *sdk.Flow {
	return sdk.NewFlow("killed", sdk.Image("example.com/flow:v1"), sdk.CPU("100m"), sdk.Memory("64Mi")).
		Step("first", sdk.Command("first"), runFor("4s")).
		Step("fan", sdk.After("first"), sdk.Command("fan"), sdk.Foreach("a", "b", "c"), runFor("6s")).
		Step("side", sdk.Command("side"), runFor("12s")).
		Step("join", sdk.After("fan", "side"), sdk.Command("join"), runFor("4s"))
}

// runner is one runner started as a subprocess.
type runnerProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// startRunner starts program (this test binary) as flow's program with args,
// in dir.
func startRunner(t *testing.T, flow, dir string, args ...string) *runnerProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &runnerProc{cmd: exec.Command(exe, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Args[0] = flow
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p
}

// kill SIGKILLs the runner after d unless it ends first, and waits for it; it
// reports whether the kill ended it.
func (p *runnerProc) kill(d time.Duration) bool {
	select {
	case <-p.done:
		return false
	case <-time.After(d):
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	var exit *exec.ExitError
	return errors.As(p.err, &exit) && exit.Sys().(syscall.WaitStatus).Signaled()
}

// tracker watches the Jobs and pods of a run from the outside and keeps every
// one ever created, by the name of the Job (each unit has a Job name of its
// own, the same in every attempt of the run).
type tracker struct {
	mu sync.Mutex
	// jobs and pods are the UIDs created under each Job name, and the pods
	// of a foreach step's Indexed Job under its name, "#" and their index.
	jobs, pods map[string][]string
	// done holds those names a Job or pod of which has succeeded.
	done map[string]bool
	// units names the unit of each such name: step, or step[index].
	units  map[string]string
	cancel context.CancelFunc
}

// unitKey names the unit a Job (or a pod of it) belongs to: step, or
// step[index] for a foreach item.
func unitKey(labels map[string]string) string {
	k := labels[plan.LabelStep]
	if i, ok := labels[plan.LabelIndex]; ok {
		k += "[" + i + "]"
	}
	return k
}

// track starts watching run id's Jobs and pods in ns.
func track(t *testing.T, c *simcluster.Cluster, ns, id string) *tracker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &tracker{jobs: map[string][]string{}, pods: map[string][]string{}, done: map[string]bool{}, units: map[string]string{}, cancel: cancel}
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = plan.LabelRun + "=" + id }))
	seen := func(m map[string][]string, key, uid string) {
		if !slices.Contains(m[key], uid) {
			m[key] = append(m[key], uid)
		}
	}
	onJob := func(obj any) {
		j, ok := obj.(*batchv1.Job)
		if !ok {
			return
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.units[j.Name] = unitKey(j.Labels)
		seen(tr.jobs, j.Name, string(j.UID))
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				tr.done[j.Name] = true
			}
		}
	}
	onPod := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		key := p.Labels[batchv1.JobNameLabel]
		if i, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]; ok && slices.ContainsFunc(p.Spec.Containers[0].Env, func(e corev1.EnvVar) bool {
			return e.Name == plan.EnvItemFile
		}) {
			// A pod of a foreach step's Indexed Job: its item's.
			key += "#" + i
			tr.units[key] = p.Labels[plan.LabelStep] + "[" + i + "]"
		}
		seen(tr.pods, key, string(p.UID))
		if p.Status.Phase == corev1.PodSucceeded {
			tr.done[key] = true
		}
	}
	jobs, pods := f.Batch().V1().Jobs().Informer(), f.Core().V1().Pods().Informer()
	if _, err := jobs.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onJob, UpdateFunc: func(_, o any) { onJob(o) }}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: onPod, UpdateFunc: func(_, o any) { onPod(o) }}); err != nil {
		t.Fatal(err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), jobs.HasSynced, pods.HasSynced) {
		t.Fatal("the tracker's informers did not start")
	}
	return tr
}

// succeeded waits up to a while for the tracker to see unit label succeed
// (its informers may lag behind the runner's), and reports whether it did.
func (tr *tracker) succeeded(label string) bool {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		tr.mu.Lock()
		done := false
		for name, l := range tr.units {
			done = done || l == label && tr.done[name]
		}
		tr.mu.Unlock()
		if done || time.Now().After(deadline) {
			return done
		}
	}
}

// twice returns the units for which more than one Job or pod was created.
func (tr *tracker) twice() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var out []string
	for _, m := range []map[string][]string{tr.jobs, tr.pods} {
		for name, uids := range m {
			if l := tr.units[name]; len(uids) > 1 && !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkRecord reads the record of run id under root as a reader would after a
// kill, and checks that it parses and agrees with what happened on the
// cluster: a task recorded succeeded did succeed there, and has its start and
// end; nothing is recorded failed, skipped or interrupted; no temporary file
// was left. It returns the labels recorded succeeded.
func checkRecord(t *testing.T, root, id string, truth func(string) bool) []string {
	t.Helper()
	dir := filepath.Join(root, id)
	if _, err := os.Stat(filepath.Join(dir, "run.json")); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	rec, tasks, err := record.Read(root, id)
	if err != nil {
		t.Errorf("the record is corrupt: %v", err)
		return nil
	}
	if rec.State != record.Abandoned && rec.State != record.Succeeded {
		t.Errorf("run.json says %s after the runner was killed; want abandoned (or succeeded)", rec.State)
	}
	var succeeded []string
	for _, task := range tasks {
		switch task.State {
		case record.Pending, record.Running, record.Queued:
		case record.Succeeded:
			succeeded = append(succeeded, task.Label())
			if !truth(task.Label()) {
				t.Errorf("%s is recorded succeeded, but none of its Jobs or pods succeeded on the cluster", task.Label())
			}
			if task.Start.IsZero() || task.End.Before(task.Start) {
				t.Errorf("%s is recorded succeeded with start %v and end %v", task.Label(), task.Start, task.End)
			}
		default:
			t.Errorf("%s is recorded %s (%s); nothing in this run fails", task.Label(), task.State, task.Error)
		}
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(d.Name(), ".tmp") {
			t.Errorf("a temporary file is left in the record: %s", path)
		}
		return nil
	})
	return succeeded
}

// TestRunnerKilled kills `run --kube` with SIGKILL at random moments, again and
// again, resuming it each time with --run-id, then lets it finish: the run
// succeeds, every step had exactly one Job and each unit one pod (running Jobs
// were adopted, succeeded ones never made again), the record parses and agrees
// with the cluster after every kill, and nothing with the run's label is left.
func TestRunnerKilled(t *testing.T) {
	t.Parallel() // waits on kwok's and the pod garbage collector's clocks
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	root := t.TempDir()
	const id = "killed"
	tr := track(t, c, ns, id)
	rounds, rng := proctest.KillSchedule(t)
	args := []string{"run", "--kube", "--no-build", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--run-id", id}
	runs := filepath.Join(root, record.DefaultRoot)

	var outputs bytes.Buffer
	defer func() {
		if t.Failed() {
			t.Logf("the runners' output:\n%s", outputs.String())
		}
	}()
	kills, recorded := 0, map[string]bool{}
	for i := range rounds {
		delay := time.Duration(100+rng.IntN(2900)) * time.Millisecond
		p := startRunner(t, "killed", root, args...)
		killed := p.kill(delay)
		fmt.Fprintf(&outputs, "--- runner %d (kill after %s: %v) ---\n%s", i+1, delay, killed, p.out)
		if !killed {
			t.Logf("runner %d ended before its kill after %s: %v", i+1, delay, p.err)
			break
		}
		kills++
		t.Logf("kill %d after %s", kills, delay)
		for _, l := range checkRecord(t, runs, id, tr.succeeded) {
			recorded[l] = true
		}
		if t.Failed() {
			t.Fatalf("after kill %d (seed in the log above)", kills)
		}
	}

	p := startRunner(t, "killed", root, args...)
	select {
	case <-p.done:
	case <-time.After(5 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	fmt.Fprintf(&outputs, "--- last runner ---\n%s", p.out)
	if p.err != nil {
		t.Fatalf("the last runner: %v\n%s", p.err, p.out)
	}
	rec, tasks, err := record.Read(runs, id)
	if err != nil {
		t.Fatalf("the record is corrupt: %v", err)
	}
	if rec.State != record.Succeeded {
		t.Errorf("run.json: %s; want succeeded", rec.State)
	}
	if len(tasks) != 6 {
		t.Errorf("the record holds %d tasks; want 6", len(tasks))
	}
	for _, task := range tasks {
		if task.State != record.Succeeded || task.Start.IsZero() || task.End.Before(task.Start) {
			t.Errorf("%s: %s, start %v, end %v; want succeeded with its times", task.Label(), task.State, task.Start, task.End)
		}
	}
	if twice := tr.twice(); len(twice) > 0 {
		t.Errorf("steps run twice (more than one Job or pod made for them): %v", twice)
	}
	tr.mu.Lock()
	jobs, pods := len(tr.jobs), len(tr.pods)
	tr.mu.Unlock()
	// fan's three items are one Indexed Job, and a pod each.
	if jobs != 4 || pods != 6 {
		t.Errorf("Jobs were made for %d steps and pods for %d units; want 4 and 6", jobs, pods)
	}
	if left := labelled(t, c, ns, id); len(left) > 0 {
		t.Errorf("left on the cluster: %v", left)
	}
	t.Logf("survived %d kills; %d units recorded succeeded at some kill; steps run twice: %d", kills, len(recorded), len(tr.twice()))
}
