package e2e_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// realNodeConfig is a manifold.toml that sends every step to the real nodes.
const realNodeConfig = `base_image = "scratch"

[node_selector]
"` + simcluster.LabelRealNode + `" = "true"

[[tolerations]]
key = "` + simcluster.LabelRealNode + `"
operator = "Exists"
effect = "NoSchedule"
`

// TestRealNodeRunKube: hello runs through `run --kube`, as Jobs and as JobSets,
// in real containers: the run builds the flow's own image and pushes it to the
// loopback registry; each Run step's container runs `hello step NAME` from it;
// greet's artifact, written by its pod into the shared volume, is read by
// shout's pod; the steps' output is streamed from their containers' logs; the
// Command step runs busybox with the kubelet expanding $(MANIFOLD_PARAM_NAME).
func TestRealNodeRunKube(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	bin := exampletest.Build(t)["hello"]
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
	for _, as := range []string{"job", "jobset"} {
		t.Run(as, func(t *testing.T) {
			ns := c.Namespace(t)
			store := t.TempDir()
			c.HostPathClaim(t, ns, "art", store)
			work, env := exampletest.Workspace(t)
			if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(realNodeConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			id := "real-" + as
			cmd := exec.Command(bin, "run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as,
				"--image", reg.Host+"/flows/hello:v1", "--artifacts", "pvc://art", "--run-id", id, "--keep")
			cmd.Dir, cmd.Env = work, env
			out, err := cmd.CombinedOutput()
			t.Logf("hello run --kube --as %s:\n%s", as, out)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			for _, want := range []string{`(?m)greet +\| hello, world$`, `(?m)shout +\| HELLO, WORLD!$`, `(?m)echo +\| hello, world, from a Command step$`, `run ` + id + ` succeeded`} {
				if !regexp.MustCompile(want).Match(out) {
					t.Errorf("the run's output lacks %s", want)
				}
			}
			// What each step put is in the volume, as its container wrote it.
			put := map[string]string{}
			filepath.WalkDir(store, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
					var v string
					if data, err := os.ReadFile(path); err == nil && json.Unmarshal(data, &v) == nil {
						rel, _ := filepath.Rel(store, path)
						put[rel] = v
					}
				}
				return nil
			})
			var greeting, shout bool
			for path, v := range put {
				greeting = greeting || strings.HasSuffix(path, filepath.Join("greet", "greeting.json")) && v == "hello, world"
				shout = shout || strings.HasSuffix(path, filepath.Join("shout", "shout.json")) && v == "HELLO, WORLD!"
			}
			if !greeting || !shout {
				t.Errorf("artifacts in the volume: %v; want greet/greeting.json = hello, world and shout/shout.json = HELLO, WORLD!", put)
			}
			// Every pod of the run ran on the real node, to completion.
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
			if err != nil || len(pods.Items) < 3 {
				t.Fatalf("%d pods of the run (%v); want one per step", len(pods.Items), err)
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != node.Name {
					t.Errorf("pod %s ran on %s, not the real node %s", p.Name, p.Spec.NodeName, node.Name)
				}
				for _, s := range p.Status.ContainerStatuses {
					if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
						t.Errorf("pod %s container %s: %+v; want exited 0", p.Name, s.Name, s.State)
					}
				}
			}
		})
	}
}
