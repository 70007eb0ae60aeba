//go:build linux

package kube_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/ptytest"
	"github.com/manifoldflow/manifold/harness/simcluster"
)

// TestLiveView runs the foreach example on the cluster with its output on a
// terminal: the run draws the live view (one row per step or item, with the
// header), redraws it in place, and leaves it showing every step succeeded.
func TestLiveView(t *testing.T) {
	c := simcluster.Shared(t)
	bins := exampletest.Build(t)
	ns := c.Namespace(t)
	control, tty, err := ptytest.Open(120, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	cmd := exec.Command(bins["foreach"], "run", "--kube", "--no-build", "--kubeconfig", c.Kubeconfig, "--namespace", ns)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "TERM=xterm")
	cmd.Stdout, cmd.Stderr = tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	raw, err := ptytest.ReadAll(control)
	if werr := cmd.Wait(); werr != nil {
		t.Fatalf("foreach run --kube: %v\n%q", werr, raw)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := string(raw)
	t.Logf("terminal:\n%q", out)
	if n := strings.Count(out, "\x1b[J"); n < 2 {
		t.Errorf("the view was drawn over %d times; want it redrawn in place", n)
	}
	if regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d\.\d{3} `).MatchString(out) {
		t.Errorf("timestamped lines on a terminal; want the live view")
	}
	if !regexp.MustCompile(`STEP\s+STATE\s+PODS\s+NODE\s+ATTEMPT\s+TIME`).MatchString(out) {
		t.Errorf("no header row in the view")
	}
	// The last view drawn shows every step and item succeeded.
	last := out[strings.LastIndex(out, "\x1b[J"):]
	for _, label := range []string{"plan", `process\[0\]`, `process\[1\]`, `process\[2\]`, "report"} {
		if !regexp.MustCompile(`(?m)^\s*` + label + `\s+succeeded\s+m7i-8xlarge-\d\s+1/\d+\s+\S+`).MatchString(last) {
			t.Errorf("the last view has no row %s succeeded on a node, attempt 1:\n%s", label, last)
		}
	}
}
