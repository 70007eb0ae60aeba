package e2e_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// dynamicCases are the runs of the dynamic example the real-node tests make:
// three shards, item 1 failing its first attempt (only it runs again); one
// shard (the other branch); none (the join sees none, and nothing fails).
var dynamicCases = []struct {
	name   string
	params []string
	// attempts are the attempts each item is recorded with.
	attempts []int
}{
	{"three-flaky", []string{"--param", "shards=3", "--param", "fail-once=1"}, []int{1, 2, 1}},
	{"one", []string{"--param", "shards=1"}, []int{1}},
	{"none", []string{"--param", "shards=0"}, nil},
}

// TestRealNodeDynamicKube runs the dynamic example with `run --kube` in real
// containers on the real node, its store an S3 bucket (moto on loopback, which
// the pods reach from the node's network), for each of dynamicCases, and on
// this machine with `run`: every artifact the run put on the cluster (each
// item's rows, pick's total and size, the branch's summary, report's report)
// is the same bytes as on this machine, each item ran as often as the case
// says, the branch not taken is recorded so, and process's items were one
// Indexed Job of as many completions (none over no shard).
func TestRealNodeDynamicKube(t *testing.T) {
	c := simcluster.Shared(t)
	node := c.RealNode(t)
	bin := exampletest.Build(t)["dynamic"]
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv := s3test.Start(t)
	for _, tc := range dynamicCases {
		t.Run(tc.name, func(t *testing.T) {
			// On this machine: the reference.
			work, env := exampletest.Workspace(t)
			local := exec.Command(bin, append([]string{"run", "--run-id", "local"}, tc.params...)...)
			local.Dir, local.Env = work, env
			if out, err := local.CombinedOutput(); err != nil {
				t.Fatalf("dynamic run: %v\n%s", err, out)
			}
			want := runArtifacts(t, filepath.Join(work, record.DefaultRoot, "local"))

			store := s3Store(t, c, srv, "dyn-"+tc.name)
			if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(store.config+realNodeConfig), 0o644); err != nil {
				t.Fatal(err)
			}
			id := "dyn-" + tc.name
			args := append([]string{"run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", store.ns,
				"--image", reg.Host + "/flows/dynamic:v1", "--run-id", id, "--keep"}, store.args...)
			cmd := exec.Command(bin, append(args, tc.params...)...)
			cmd.Dir, cmd.Env = work, append(env, srv.Env()...)
			output, err := cmd.CombinedOutput()
			t.Logf("dynamic run --kube:\n%s", output)
			if err != nil {
				t.Fatalf("run --kube: %v", err)
			}
			got := map[string][]byte{}
			for key, data := range store.read(t) {
				if k, ok := strings.CutPrefix(key, "dynamic/"+id+"/"); ok {
					got[k] = data
				}
			}
			if !maps.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("the run on the cluster put %v; on this machine %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
				for k, w := range want {
					if !bytes.Equal(got[k], w) {
						t.Errorf("%s: %q on the cluster, %q here", k, got[k], w)
					}
				}
			}
			_, tasks, err := record.Read(filepath.Join(work, record.DefaultRoot), id)
			if err != nil {
				t.Fatal(err)
			}
			attempts := map[string]int{}
			var items []int
			for _, task := range tasks {
				attempts[task.Label()] = task.Attempts
				if task.Step == "process" && task.Index != nil {
					items = append(items, task.Attempts)
				}
			}
			if !slices.Equal(items, tc.attempts) {
				t.Errorf("process's items ran %v times; want %v", items, tc.attempts)
			}
			pods, err := c.Client.CoreV1().Pods(store.ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pods.Items {
				if p.Spec.NodeName != node.Name {
					t.Errorf("pod %s ran on %s, not the real node", p.Name, p.Spec.NodeName)
				}
			}
			jobs, err := c.Client.BatchV1().Jobs(store.ns).List(ctx, metav1.ListOptions{LabelSelector: plan.LabelRun + "=" + id + "," + plan.LabelStep + "=process"})
			if err != nil {
				t.Fatal(err)
			}
			switch n := len(tc.attempts); {
			case n == 0 && len(jobs.Items) != 0:
				t.Errorf("process over no shard made %d Jobs", len(jobs.Items))
			case n > 0 && (len(jobs.Items) != 1 || *jobs.Items[0].Spec.Completions != int32(n)):
				t.Errorf("process made %d Jobs; want one Indexed Job of %d completions", len(jobs.Items), n)
			}
		})
	}
}

// runArtifacts returns every artifact of the run kept in dir, by its key
// (<step>/<name>.json, <step>/<index>/<name>.json).
func runArtifacts(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() && strings.HasPrefix(rel, "_") {
			return filepath.SkipDir // the record's own
		}
		if d.IsDir() || !strings.HasSuffix(path, ".json") || filepath.Dir(rel) == "." {
			return nil
		}
		data, err := os.ReadFile(path)
		out[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
