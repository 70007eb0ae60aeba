package kube_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// realNodeFlow is a flow of busybox Command steps that runs on the real nodes,
// with opts added to its own.
func realNodeFlow(name string, opts ...sdk.FlowOption) *sdk.Flow {
	return sdk.NewFlow(name, append([]sdk.FlowOption{sdk.Image("busybox:1.37"), sdk.CPU("10m"),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "true", "NoSchedule")}, opts...)...)
}

// TestRealFailures: the ways a step fails, in real containers on a real node,
// each told as it happened: a command that exits 1 (with its last log lines), one
// that allocates past its memory limit (OOMKilled, exit 137), Retry(2) making
// three real attempts, Timeout ending a step that sleeps, and an image that does
// not exist (named once, then failed after the pending grace).
func TestRealFailures(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	ctx := context.Background()
	c.PushBusybox(t, "busybox:1.37")
	f := realNodeFlow("real-fail", sdk.Memory("64Mi")).
		Step("exits", sdk.Command("sh", "-c", "echo writing the checkpoint; echo disk full >&2; exit 1")).
		Step("oom", sdk.Command("sh", "-c", "head -c 400m /dev/zero | tail"), sdk.Memory("32Mi")).
		Step("retries", sdk.Command("sh", "-c", "echo trying; exit 2"), sdk.Retry(2)).
		Step("slow", sdk.Command("sleep", "600"), sdk.Timeout(3*time.Second)).
		Step("noimage", sdk.Command("true"), sdk.Image("registry.example.com/team/missing:1"))
	o := options(c, c.Namespace(t), t.TempDir())
	o.PendingGrace = 5 * time.Second
	r := runFlow(t, ctx, compileFlow(t, f), o)
	if r.res == nil || r.res.State != record.Failed {
		t.Fatalf("run: %v; want it failed", r.err)
	}
	for _, tt := range []struct {
		step, reason string
		code         int
		want         []string
	}{
		{"exits", "Error", 1, []string{"Error (exit 1)", "disk full"}},
		{"oom", "OOMKilled", 137, []string{"OOMKilled (exit 137)"}},
		{"retries", "Error", 2, []string{"Error (exit 2)"}},
		{"slow", "DeadlineExceeded", -1, []string{"DeadlineExceeded"}},
		{"noimage", "", -1, []string{"registry.example.com/team/missing:1"}},
	} {
		task := r.tasks[tt.step]
		if task.State != record.Failed {
			t.Errorf("%s: %s, want failed", tt.step, task.State)
			continue
		}
		if tt.reason != "" && task.Reason != tt.reason {
			t.Errorf("%s: reason %q, want %q (error %q)", tt.step, task.Reason, tt.reason, task.Error)
		}
		if tt.code >= 0 && (task.ExitCode == nil || *task.ExitCode != tt.code) {
			t.Errorf("%s: exit code %v, want %d", tt.step, task.ExitCode, tt.code)
		}
		for _, w := range tt.want {
			if !strings.Contains(task.Error, w) {
				t.Errorf("%s: error %q lacks %q", tt.step, task.Error, w)
			}
		}
		if !strings.Contains(task.Node, node.Name) && tt.step != "noimage" {
			t.Errorf("%s ran on %q, not the real node", tt.step, task.Node)
		}
	}
	if n := r.tasks["retries"].Attempts; n != 3 {
		t.Errorf("retries made %d attempts, want 3 (Retry(2))", n)
	}
	if !strings.Contains(r.tasks["noimage"].Reason, "ImagePull") {
		t.Errorf("noimage: reason %q, want ErrImagePull or ImagePullBackOff", r.tasks["noimage"].Reason)
	}
	// The image that cannot be pulled is told once before the step fails.
	told := 0
	for _, line := range strings.Split(r.out.String(), "\n") {
		if strings.Contains(line, "noimage:") && strings.Contains(line, "ImagePull") && !strings.Contains(line, "failed after") {
			told++
		}
	}
	if told != 1 {
		t.Errorf("the image pull failure was told %d times before the failure, want once", told)
	}
}

// TestRealInterruptAndResume: an interrupt while a container runs stops it (its
// pod ends within its grace period: the command traps SIGTERM), nothing labelled
// with the run is left, and --run-id resumes only what did not finish: the step
// that succeeded is not run again, the interrupted one runs anew.
func TestRealInterruptAndResume(t *testing.T) {
	c := simcluster.Shared(t)
	c.RealNode(t)
	ctx := context.Background()
	c.PushBusybox(t, "busybox:1.37")
	ns := c.Namespace(t)
	gate := t.TempDir()
	c.HostPathClaim(t, ns, "gate", gate)
	// hold runs until the gate opens (a file the test writes on the node's disk).
	f := realNodeFlow("real-interrupt", sdk.Memory("16Mi")).
		Step("quick", sdk.Command("true")).
		Step("hold", sdk.After("quick"), sdk.Volume("gate", "/gate"),
			sdk.Command("sh", "-c", `trap 'echo stopping; exit 143' TERM; echo holding; while [ ! -e /gate/open ]; do sleep 0.2; done; echo released`)).
		Step("last", sdk.After("hold"), sdk.Command("true"))
	p := compileFlow(t, f)
	root := t.TempDir()
	o := options(c, ns, root)
	o.RunID = "real-resume"

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := &syncBuffer{}
	o.Stdout, o.Stderr = out, out
	type result struct {
		res *kube.Result
		err error
	}
	ended := make(chan result, 1)
	go func() {
		res, err := kube.Run(runCtx, p, o)
		ended <- result{res, err}
	}()
	deadline := time.Now().Add(2 * time.Minute)
	holding := regexp.MustCompile(`(?m)hold +\| holding$`)
	for !holding.MatchString(out.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("hold's container never said it was holding:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	interrupted := time.Now()
	cancel()
	var first result
	select {
	case first = <-ended:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the run did not end after the interrupt:\n%s", out)
	}
	t.Logf("interrupted run:\n%s", out)
	if !errors.Is(first.err, kube.ErrInterrupted) || first.res == nil || first.res.State != record.Interrupted {
		t.Fatalf("interrupted run: %v, %+v", first.err, first.res)
	}
	if took := time.Since(interrupted); took > 30*time.Second {
		t.Errorf("the interrupted run took %s to end; its pod traps SIGTERM and ends at once", took)
	}
	if left := labelled(t, c, ns, o.RunID); len(left) > 0 {
		t.Errorf("left after the interrupt: %v", left)
	}

	if err := os.WriteFile(filepath.Join(gate, "open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o.Keep = true
	r := runFlow(t, ctx, p, o)
	if r.err != nil {
		t.Fatalf("resumed run: %v", r.err)
	}
	if !strings.Contains(r.out.String(), "quick: succeeded in an earlier attempt of this run: not run again") {
		t.Errorf("the resumed run does not say quick is not run again")
	}
	if !strings.Contains(r.out.String(), "released") {
		t.Errorf("hold did not run again to completion")
	}
	jobs, err := c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + o.RunID})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, j := range jobs.Items {
		steps = append(steps, j.Labels[plan.LabelStep])
	}
	slices.Sort(steps)
	if strings.Join(steps, ",") != "hold,last" {
		t.Errorf("the resumed run created Jobs for %v, want hold and last only", steps)
	}
}
