package kube_test

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// holdFinalizer keeps a deleted object on the cluster until the test lets go.
const holdFinalizer = "test.manifold.dev/hold"

// TestSecondInterrupt interrupts `foreach run --kube` twice: the first SIGINT
// starts deleting the run's objects, and since one Job is held by a finalizer the
// run waits; the second stops the wait at once, and the run exits 130 naming what
// it left.
func TestSecondInterrupt(t *testing.T) {
	c := simcluster.Shared(t)
	bins := exampletest.Build(t)
	ns := c.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// process asks for more EFA than any node has, so its pods wait.
	cmd := exec.Command(bins["foreach"], "run", "--kube", "--no-build", "--kubeconfig", c.Kubeconfig, "--namespace", ns,
		"--run-id", "twice", "--set", "process.efa=32", "--no-check")
	cmd.Dir = t.TempDir()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out []string
	waitFor := func(what string) {
		t.Helper()
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the run ended before printing %q:\n%s", what, strings.Join(out, "\n"))
				}
				out = append(out, l)
				if strings.Contains(l, what) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("no %q:\n%s", what, strings.Join(out, "\n"))
			}
		}
	}

	// Hold process's Job (its items' one Indexed Job) once a pod of it waits
	// for the scheduler.
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=twice," + plan.LabelStep + "=process"})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok && p.Status.Phase == corev1.PodPending {
			break
		}
	}
	w.Stop()
	jobs := c.Client.BatchV1().Jobs(ns)
	held := "foreach-process-"
	list, err := jobs.List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=twice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		if strings.HasPrefix(j.Name, held) {
			held = j.Name
		}
	}
	patch := []byte(`{"metadata":{"finalizers":["` + holdFinalizer + `"]}}`)
	if _, err := jobs.Patch(ctx, held, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("hold Job %s: %v", held, err)
	}
	t.Cleanup(func() {
		_, _ = jobs.Patch(context.Background(), held, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("deleting what run twice created (Ctrl-C again to stop waiting)")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitFor("left on the cluster: ")
	for l := range lines {
		out = append(out, l)
	}
	err = cmd.Wait()
	t.Logf("output:\n%s", strings.Join(out, "\n"))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("exit: %v; want status 130", err)
	}
	all := strings.Join(out, "\n")
	if !strings.Contains(all, "Job "+ns+"/"+held) {
		t.Errorf("the output does not name the held Job %s as left", held)
	}
	if !strings.Contains(all, "run twice interrupted") {
		t.Errorf("the output does not say the run was interrupted")
	}
}
