package kube_test

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/plan"
)

// TestRunBuildsImage runs `foreach run --kube --image REF` as a user would, from
// a checkout of its own (a workspace of this module): the flow has Run steps, so
// the run first builds the program's image and pushes it to a real registry, and
// every Run step's Job names that image by digest.
func TestRunBuildsImage(t *testing.T) {
	c := simcluster.Shared(t)
	bin := exampletest.Build(t)["foreach"]
	ns := c.Namespace(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")

	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte("base_image = \"scratch\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", ns,
		"--image", host+"/flows/foreach:v1", "--run-id", "built", "--keep")
	cmd.Dir = work
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	t.Logf("foreach run --kube --image:\n%s", out)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	built, err := built.Read(filepath.Join(work, built.File))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(built.Reference, host+"/flows/foreach@sha256:") {
		t.Fatalf("recorded image %q; want it pushed to %s by digest", built.Reference, host)
	}
	ref, err := name.ParseReference(built.Reference)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Image(ref); err != nil {
		t.Errorf("the registry does not hold %s: %v", built.Reference, err)
	}
	jobs, err := c.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: plan.LabelRun + "=built"})
	if err != nil || len(jobs.Items) != 3 {
		t.Fatalf("%d Jobs (%v); want 3: plan, the Indexed Job of process's 3 items, report", len(jobs.Items), err)
	}
	for _, j := range jobs.Items {
		if got := j.Spec.Template.Spec.Containers[0].Image; got != built.Reference {
			t.Errorf("Job %s runs %s; want the image built, %s", j.Name, got, built.Reference)
		}
	}
}
