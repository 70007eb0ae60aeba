package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/doctest"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// TestKindWalkthrough runs the kind walkthrough of docs/cluster.md as it is
// written, read from the page (the block marked `doctest: e2e
// TestKindWalkthrough`), against the simulated cluster with real nodes shaped as
// the walkthrough's `kind up --simulate` shapes kind's workers: trn1.32xlarge and
// inf2.xlarge, and a plain node for the steps that ask no accelerator (kind's
// control plane). `kind up`, `kind load` and `kind down` need a container engine
// and are not run; in kind load's place the image archive is imported into every
// node's containerd, as kind load does. Everything else the test sets up outside
// the commands: the kubeconfig (KUBECONFIG) holds the context kind-manifold,
// whose namespace is the test's, and the working directory's manifold.toml sends
// the steps to the real nodes (their toleration and label) and builds on an empty
// base (scratch: no image is fetched from the network here).
func TestKindWalkthrough(t *testing.T) {
	block, err := doctest.Find(exampletest.Root(), t.Name())
	if err != nil {
		t.Fatal(err)
	}
	c := simcluster.Shared(t)
	ctx := context.Background()
	// The nodes kind up --simulate trn1.32xlarge=1,inf2.xlarge=1 makes.
	nodes := map[string]*simcluster.Node{"": c.RealNode(t)}
	for _, typ := range []string{"trn1.32xlarge", "inf2.xlarge"} {
		n, err := c.StartNode(ctx, simcluster.NodeOptions{Name: "kind-" + strings.ReplaceAll(typ, ".", "-"), InstanceType: typ})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Stop() })
		nodes[typ] = n
	}
	ns := c.Namespace(t)
	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env = append(env, "KUBECONFIG="+kindKubeconfig(t, c.Kubeconfig, ns))
	bins := exampletest.Build(t)
	// A run that succeeds deletes its pods: watch them from the start.
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: plan.LabelFlow + "=rehearse"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ended := map[string]*corev1.Pod{} // the pods whose containers have all ended, by name
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && len(p.Status.ContainerStatuses) > 0 && allTerminated(p) {
				ended[p.Name] = p
			}
		}
	}()

	var ran []string
	var runOutput string
	for _, cmd := range block.Commands() {
		flowName, rest, ok := strings.Cut(strings.TrimPrefix(cmd, "go run ./examples/"), " ")
		bin := bins[flowName]
		if !ok || !strings.HasPrefix(cmd, "go run ./examples/") || bin == "" {
			t.Fatalf("%s: %q: the walkthrough's commands are go run ./examples/NAME ...", block, cmd)
		}
		switch {
		case strings.HasPrefix(rest, "kind up"), strings.HasPrefix(rest, "kind down"):
			continue
		case strings.HasPrefix(rest, "kind load "):
			archive := filepath.Join(work, strings.TrimSpace(strings.TrimPrefix(rest, "kind load ")))
			for _, n := range nodes {
				if err := n.ImportImage(archive); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		sh := exec.Command("sh", "-c", bin+" "+rest)
		sh.Dir, sh.Env = work, env
		out, err := sh.CombinedOutput()
		t.Logf("$ %s\n%s", cmd, out)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		ran = append(ran, rest)
		if strings.HasPrefix(rest, "run --kube") {
			runOutput = string(out)
		}
	}
	if runOutput == "" {
		t.Fatalf("the walkthrough ran no run --kube; it ran %q", ran)
	}
	for _, want := range []string{
		`(?m)prepare +\| preparing 2 epochs of data$`,
		`(?m)train +\| training for 2 epochs with FI_PROVIDER="efa"$`,
		`(?m)evaluate +\| evaluating on inf2$`,
		`run \S+ succeeded`,
	} {
		if !regexp.MustCompile(want).MatchString(runOutput) {
			t.Errorf("the run's output lacks %s", want)
		}
	}
	// Each step ran, in a container that exited 0, on the node of its instance type.
	w.Stop()
	<-done
	want := map[string]string{"prepare": nodes[""].Name, "train": nodes["trn1.32xlarge"].Name, "evaluate": nodes["inf2.xlarge"].Name}
	seen := map[string]bool{}
	for _, p := range ended {
		step := p.Labels[plan.LabelStep]
		seen[step] = true
		if p.Spec.NodeName != want[step] {
			t.Errorf("step %s's pod %s ran on %s, want %s", step, p.Name, p.Spec.NodeName, want[step])
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Terminated.ExitCode != 0 {
				t.Errorf("pod %s container %s exited %d, want 0", p.Name, s.Name, s.State.Terminated.ExitCode)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("pods of steps %v were seen to end; want one of each of %v", seen, want)
	}
}

// allTerminated tells whether every container of pod p has ended.
func allTerminated(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Terminated == nil {
			return false
		}
	}
	return true
}

// kindKubeconfig writes a copy of the cluster's kubeconfig whose one context is
// named as kind names it (kind-manifold), with namespace ns.
func kindKubeconfig(t *testing.T, from, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		t.Fatal(err)
	}
	kctx := cfg.Contexts[cfg.CurrentContext]
	if kctx == nil {
		t.Fatalf("%s has no current context", from)
	}
	kctx.Namespace = ns
	delete(cfg.Contexts, cfg.CurrentContext)
	cfg.Contexts["kind-manifold"] = kctx
	cfg.CurrentContext = "kind-manifold"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
