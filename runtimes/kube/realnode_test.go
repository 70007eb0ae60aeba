package kube_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestRealFailures: the ways a step fails, in real containers on a real node,
// each told as it happened: a command that exits 1 (with its last log lines), one
// that allocates past its memory limit (OOMKilled, exit 137), Retry(2) making
// three real attempts, Timeout ending a step that sleeps, and an image that does
// not exist (named once, then failed after the pending grace).
func TestRealFailures(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := simcluster.BusyboxImage(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Push(ctx, "busybox:1.37", busybox); err != nil {
		t.Fatal(err)
	}
	f := sdk.NewFlow("real-fail",
		sdk.Image("busybox:1.37"), sdk.CPU("10m"), sdk.Memory("64Mi"),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"),
		sdk.Toleration(simcluster.LabelRealNode, "true", "NoSchedule"),
	).
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
