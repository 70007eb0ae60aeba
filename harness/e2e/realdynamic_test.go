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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// dynamicCase is one run of examples/dynamic: its params, and the shard
// whose first attempt fails (-1: none), which alone runs twice.
type dynamicCase struct {
	name   string
	params []string
	failed string
}

var dynamicCases = []dynamicCase{
	{"none", []string{"shards=0"}, ""},
	{"one", []string{"shards=1"}, ""},
	{"three", []string{"shards=3"}, ""},
	{"retry", []string{"shards=3", "fail-once=1"}, "1"},
}

// dynamicRun is what a runtime's run of a dynamicCase left: the artifacts of
// the run (keys as artifact.Key makes them) and, where the runtime has pods,
// the pods of each item of process by MANIFOLD_INDEX.
type dynamicRun struct {
	artifacts map[string][]byte
	items     map[string][]corev1.Pod
}

// dynamicSetup is what every runtime's subtest shares: the example's program,
// its image in the loopback registry, the S3 server, and the local runs that
// every other runtime's must equal.
type dynamicSetup struct {
	c     *simcluster.Cluster
	node  *simcluster.Node
	srv   *s3test.Server
	base  *example
	built built.Record
	local map[string]dynamicRun
}

// TestRealNodeDynamic runs examples/dynamic — list puts N shards, process
// fans out over them, pick branches on their total, report joins the branch
// taken — on this machine and on each runtime that runs dynamic flows, in
// real containers on a real node with one S3 store (moto on loopback), for
// N = 0 (no item: the join sees none and nothing fails), 1 and 3, and with a
// shard whose first attempt fails (Retry(1): only it runs again). Every run
// puts the same artifacts, byte for byte, as the run on this machine.
func TestRealNodeDynamic(t *testing.T) {
	d := newDynamicSetup(t)
	t.Run("kube", func(t *testing.T) {
		for _, tc := range dynamicCases {
			t.Run(tc.name, func(t *testing.T) { d.check(t, tc, d.runKube(t, tc)) })
		}
	})
	t.Run("argo", func(t *testing.T) {
		for _, tc := range dynamicCases {
			t.Run(tc.name, func(t *testing.T) { d.check(t, tc, d.runArgo(t, tc)) })
		}
	})
	t.Run("airflow", func(t *testing.T) {
		a := d.startAirflow(t, "dynamic-airflow", true)
		for _, tc := range dynamicCases {
			t.Run(tc.name, func(t *testing.T) { d.check(t, tc, d.runAirflow(t, a, tc)) })
		}
		t.Run("values", func(t *testing.T) { d.values(t, a) })
	})
}

// newDynamicSetup builds the example's image and runs each case on this
// machine.
func newDynamicSetup(t testing.TB) *dynamicSetup {
	c := simcluster.Shared(t)
	d := &dynamicSetup{c: c, node: c.RealNode(t), srv: s3test.Start(t), local: map[string]dynamicRun{}}
	reg, err := c.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d.base = &example{Name: "dynamic", bin: exampletest.Build(t)["dynamic"]}
	work, env := exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(work, compile.ConfigFile), []byte(realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(d.base.bin, "image", "build", "--tag", reg.Host+"/flows/dynamic:parity", "--push")
	build.Dir, build.Env = work, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("dynamic image build: %v\n%s", err, out)
	}
	if d.built, err = built.Read(filepath.Join(work, built.File)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range dynamicCases {
		id := "dynamic-local-" + tc.name
		run := exec.Command(d.base.bin, append([]string{"run", "--run-id", id}, paramArgs(tc.params)...)...)
		run.Dir, run.Env = work, env
		if out, err := run.CombinedOutput(); err != nil {
			t.Fatalf("dynamic run %v: %v\n%s", tc.params, err, out)
		}
		d.local[tc.name] = dynamicRun{artifacts: dirArtifacts(t, filepath.Join(work, record.DefaultRoot, id))}
	}
	return d
}

func paramArgs(params []string) []string {
	var args []string
	for _, p := range params {
		args = append(args, "--param", p)
	}
	return args
}

// onCluster is the example with its artifacts in bucket, its steps in the
// image built, its pods in the node's network with the store's credentials.
func (d *dynamicSetup) onCluster(t testing.TB, bucket string) (*example, realStore) {
	store := s3Store(t, d.c, d.srv, bucket)
	e := *d.base
	e.config = store.config + "entrypoint = \"" + d.built.Entrypoint + "\"\n" + realNodeConfig
	e.args = slices.Clone(store.args)
	for _, s := range []string{"list", "process", "pick", "large", "small", "report"} {
		e.args = append(e.args, "--set", s+".image="+d.built.Reference)
	}
	return &e, store
}

// check compares run, of case tc, with the run of tc on this machine: the
// same artifacts, and, where run has pods, one pod per item but the one that
// failed once, which has two.
func (d *dynamicSetup) check(t *testing.T, tc dynamicCase, run dynamicRun) {
	t.Helper()
	want := d.local[tc.name].artifacts
	if len(want) == 0 {
		t.Fatal("the run on this machine put no artifact")
	}
	if diff := slices.Compare(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(run.artifacts))); diff != 0 {
		t.Errorf("artifacts %v; on this machine %v", slices.Sorted(maps.Keys(run.artifacts)), slices.Sorted(maps.Keys(want)))
	}
	for key, data := range want {
		if got, ok := run.artifacts[key]; ok && !bytes.Equal(got, data) {
			t.Errorf("artifact %s is %q; on this machine %q", key, got, data)
		}
	}
	if run.items == nil {
		return
	}
	n := strings.Count(string(want["list/shards.json"]), `"name"`)
	if len(run.items) != n {
		t.Errorf("process ran items %v, want %d", slices.Sorted(maps.Keys(run.items)), n)
	}
	for index, pods := range run.items {
		if want := 1 + bool2int(index == tc.failed); len(pods) != want {
			t.Errorf("process item %s ran %d pods, want %d", index, len(pods), want)
		}
		for _, p := range pods {
			if p.Spec.NodeName != d.node.Name {
				t.Errorf("process item %s ran on node %s, want the real node %s", index, p.Spec.NodeName, d.node.Name)
			}
		}
	}
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

// runArgo deploys the example to Argo and triggers case tc (trigger --wait:
// the follower follows the run until it ends), then reads the run's
// artifacts from its store and the pods of its items.
func (d *dynamicSetup) runArgo(t *testing.T, tc dynamicCase) dynamicRun {
	e, store := d.onCluster(t, "dynamic-argo-"+tc.name)
	d.c.ArgoExecutor(t, store.ns)
	cluster := []string{"--target", "argo", "--kubeconfig", d.c.Kubeconfig, "--namespace", store.ns}
	if out, err := e.command(t, append([]string{"deploy"}, cluster...)...).CombinedOutput(); err != nil {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	out, err := e.command(t, append(append([]string{"trigger", "--wait"}, cluster...), paramArgs(tc.params)...)...).Output()
	name, _, _ := strings.Cut(string(out), "\n")
	if err != nil {
		t.Fatalf("trigger --wait %v: %v\n%s", tc.params, err, out)
	}
	run := dynamicRun{artifacts: map[string][]byte{}, items: map[string][]corev1.Pod{}}
	prefix := "dynamic/" + name + "/"
	for key, data := range store.read(t) {
		if rest, ok := strings.CutPrefix(key, prefix); ok {
			run.artifacts[rest] = data
		}
	}
	pods, err := d.c.Client.CoreV1().Pods(store.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "workflows.argoproj.io/workflow=" + name + "," + plan.LabelStep + "=process"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		i := "?"
		for _, v := range mainContainer(t, p).Env {
			if v.Name == plan.EnvIndex {
				i = v.Value // as Argo's controller wrote it: no reference
			}
		}
		run.items[i] = append(run.items[i], p)
	}
	return run
}

// dirArtifacts returns the artifacts of the run kept in dir, by key.
func dirArtifacts(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if de.IsDir() && strings.HasPrefix(rel, "_") {
			return filepath.SkipDir // the runner's own: state and logs
		}
		if !de.IsDir() && strings.HasSuffix(path, ".json") && strings.Contains(rel, string(filepath.Separator)) {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			got[filepath.ToSlash(rel)] = data
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}
