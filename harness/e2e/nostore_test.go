package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
)

// TestRealNodeNoStore: hello without an artifact store, run by `run --kube` on
// the real node. The run warns before it creates anything; greet's container,
// to which the kubelet gives KUBERNETES_SERVICE_HOST as to every container,
// fails at its Put with the advice, rather than keep the greeting on its own
// disk, where shout's pod would not find it; shout and echo do not start.
func TestRealNodeNoStore(t *testing.T) {
	c := simcluster.Shared(t)
	c.RealNode(t)
	bins := exampletest.Build(t)
	reg, err := c.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bins["hello"], "run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", ns,
		"--image", reg.Host+"/flows/hello:nostore", "--run-id", "no-store")
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.CombinedOutput()
	t.Logf("hello run --kube without a store:\n%s", out)
	if err == nil {
		t.Fatal("the run succeeded; want greet to fail at its Put")
	}
	for _, want := range []string{
		"warning: artifacts: the flow has no artifact store, but its Run steps (steps[greet], steps[shout]) keep or read artifacts",
		`putting artifact "greeting" of step "greet": this pod has no artifact store (no MANIFOLD_ARTIFACT_STORE)`,
		"not started: shout, echo",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the run's output lacks %q", want)
		}
	}
}
