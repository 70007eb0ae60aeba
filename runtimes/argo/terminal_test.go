//go:build linux

package argo_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/harness/ptytest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/argo"
)

// TestTerminalInterrupt follows the foreach example's run with trigger --wait
// on a terminal: the live view is drawn, and Ctrl-C asks whether to stop the
// run; answered "s", the Workflow is stopped (spec.shutdown=Stop) and the
// command exits 130. Its pods run for a while (manifold.toml labels them for
// the simulated nodes), so the run is still going when interrupted.
func TestTerminalInterrupt(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "foreach")
	if out, err := exec.Command("go", "build", "-o", bin, "../../examples/foreach").CombinedOutput(); err != nil {
		t.Fatalf("go build foreach: %v\n%s", err, out)
	}
	toml := "[labels]\n\"" + simcluster.LabelRunFor + "\" = \"60s\"\n"
	if err := os.WriteFile(filepath.Join(dir, "manifold.toml"), []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--target", "argo", "--kubeconfig", c.Kubeconfig, "--namespace", ns}
	deploy := exec.Command(bin, append([]string{"deploy"}, flags...)...)
	deploy.Dir = dir
	if out, err := deploy.CombinedOutput(); err != nil {
		t.Fatalf("foreach deploy: %v\n%s", err, out)
	}

	control, tty, err := ptytest.Open(120, 40)
	if err != nil {
		t.Fatal(err)
	}
	defer control.Close()
	cmd := exec.Command(bin, append([]string{"trigger", "--wait"}, flags...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TERM=xterm")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	defer cmd.Process.Kill()

	// Read the terminal until the view shows plan running, then interrupt,
	// and answer the question.
	var seen strings.Builder
	r := bufio.NewReader(control)
	wait := func(what string, re *regexp.Regexp) {
		t.Helper()
		done := make(chan bool, 1)
		go func() {
			buf := make([]byte, 4096)
			for {
				n, err := r.Read(buf)
				seen.Write(buf[:n])
				if re.MatchString(seen.String()) {
					done <- true
					return
				}
				if err != nil {
					done <- false
					return
				}
			}
		}()
		select {
		case ok := <-done:
			if !ok {
				t.Fatalf("the terminal closed before %s:\n%q", what, seen.String())
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("no %s on the terminal after 2 minutes:\n%q", what, seen.String())
		}
	}
	wait("view of plan running", regexp.MustCompile(`STEP\s+STATE\s+POD\s+NODE\s+ATTEMPT\s+TIME[\s\S]*plan\s+running`))
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	wait("question", regexp.MustCompile(`stop run (foreach-\w+) on the cluster, or leave it running\? \[s\]top / \[L\]eave: `))
	name := regexp.MustCompile(`stop run (foreach-\w+)`).FindStringSubmatch(seen.String())[1]
	if _, err := control.Write([]byte("s\n")); err != nil {
		t.Fatal(err)
	}
	rest, _ := ptytest.ReadAll(control)
	seen.Write(rest)
	err = cmd.Wait()
	out := seen.String()
	t.Logf("terminal:\n%q", out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 130 {
		t.Errorf("trigger --wait interrupted: %v; want exit 130", err)
	}
	if !strings.Contains(out, "Workflow "+name+" was stopped") {
		t.Errorf("the terminal does not say the Workflow was stopped")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wf, err := c.Dynamic.Resource(argo.WorkflowGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(wf.Object, "spec", "shutdown"); s != "Stop" {
		t.Errorf("Workflow %s has spec.shutdown %q; want Stop", name, s)
	}
}
