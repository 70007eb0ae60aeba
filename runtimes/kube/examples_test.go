package kube_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/internal/exampletest"
	"github.com/manifoldflow/manifold/runtimes/kube/simcluster"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// TestExamples runs the neuron-train and foreach example programs as a user
// would, `<flow> run --kube`, as Jobs and as JobSets.
func TestExamples(t *testing.T) {
	c := simcluster.Shared(t)
	bins := exampletest.Build(t)
	for _, name := range []string{"neuron-train", "foreach"} {
		for _, as := range []string{"job", "jobset"} {
			t.Run(name+"/"+as, func(t *testing.T) {
				ns := c.Namespace(t)
				if name == "neuron-train" {
					c.BoundClaim(t, ns, "training-data")
				}
				dir := t.TempDir()
				cmd := exec.Command(bins[name], "run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as, "--run-id", "example")
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				t.Logf("%s run --kube --as %s:\n%s", name, as, out)
				if err != nil {
					t.Fatalf("%s run --kube: %v", name, err)
				}
				rec, tasks, err := record.Read(filepath.Join(dir, record.DefaultRoot), "example")
				if err != nil {
					t.Fatal(err)
				}
				if rec.State != record.Succeeded || rec.Runtime != "kube" || rec.Namespace != ns {
					t.Errorf("recorded %s, runtime %q, namespace %q", rec.State, rec.Runtime, rec.Namespace)
				}
				for _, task := range tasks {
					if task.State != record.Succeeded || task.Node == "" {
						t.Errorf("%s: %s on node %q; want succeeded on a node", task.Label(), task.State, task.Node)
					}
				}
				if name == "neuron-train" {
					for _, task := range tasks {
						if task.Step == "train" && strings.Count(task.Node, "trn1-32xlarge-") != 2 {
							t.Errorf("train ran on %q; want two trn1.32xlarge nodes", task.Node)
						}
					}
				}
				if !strings.Contains(string(out), "run example succeeded") {
					t.Errorf("the output does not end the run as succeeded")
				}
				if left := labelled(t, c, ns, "example"); len(left) > 0 {
					t.Errorf("left on the cluster: %v", left)
				}
			})
		}
	}
}
