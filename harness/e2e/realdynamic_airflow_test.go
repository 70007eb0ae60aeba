package e2e_test

import (
	"context"
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// xcomSidecarImage is the image of KubernetesPodOperator's XCom sidecar
// (its default): the real node pulls it, through the mirror of docker.io,
// from the loopback registry, where a busybox stands in for it.
const xcomSidecarImage = "alpine:3.24.2"

// envExitOnce names, to the Airflow home's cluster policies, a file holding
// "STEP INDEX": that item's next pod fails, once.
const envExitOnce = "MANIFOLD_EXIT_ONCE_FILE"

// dynamicSteps are the steps of examples/dynamic.
var dynamicSteps = []string{"list", "process", "pick", "large", "small", "report"}

// dynamicCluster is examples/dynamic built into an image on the loopback
// registry, ready to run on the real node.
type dynamicCluster struct {
	c    *simcluster.Cluster
	node *simcluster.Node
	srv  *s3test.Server
	bin  string
	// work holds its manifold.toml, env runs it there.
	work  string
	env   []string
	built built.Record
}

// newDynamicCluster builds examples/dynamic's image and pushes it, with the
// XCom sidecar's.
func newDynamicCluster(t *testing.T) *dynamicCluster {
	t.Helper()
	c := simcluster.Shared(t)
	d := &dynamicCluster{c: c, node: c.RealNode(t), srv: s3test.Start(t), bin: exampletest.Build(t)["dynamic"]}
	reg, err := c.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.PushBusybox(t, xcomSidecarImage)
	d.work, d.env = exampletest.Workspace(t)
	if err := os.WriteFile(filepath.Join(d.work, compile.ConfigFile), []byte(realNodeConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command(d.bin, "image", "build", "--tag", reg.Host+"/flows/dynamic:real", "--push")
	build.Dir, build.Env = d.work, d.env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("dynamic image build: %v\n%s", err, out)
	}
	if d.built, err = built.Read(filepath.Join(d.work, built.File)); err != nil {
		t.Fatal(err)
	}
	return d
}

// local runs the flow on this machine with shards and returns its artifacts
// by key (artifact.Key), the reference every target's must equal.
func (d *dynamicCluster) local(t *testing.T, shards int) map[string][]byte {
	t.Helper()
	id := "dynamic-local-" + strconv.Itoa(shards)
	cmd := exec.Command(d.bin, "run", "--run-id", id, "--param", "shards="+strconv.Itoa(shards))
	cmd.Dir, cmd.Env = d.work, d.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dynamic run --param shards=%d: %v\n%s", shards, err, out)
	}
	dir := filepath.Join(d.work, record.DefaultRoot, id)
	got := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !artifact.IsArtifact(e.Name()) {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "_") || !strings.Contains(rel, "/") {
			return nil // the run's record, not an artifact
		}
		got[rel], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// onCluster is the flow with shards on the cluster, its artifacts in a bucket
// of its own.
func (d *dynamicCluster) onCluster(t *testing.T, bucket string, shards int) (*example, realStore) {
	t.Helper()
	store := s3Store(t, d.c, d.srv, bucket)
	e := &example{Name: "dynamic", bin: d.bin}
	e.config = store.config + "entrypoint = \"" + d.built.Entrypoint + "\"\n" + realNodeConfig
	e.args = append(slices.Clone(store.args), "--param", "shards="+strconv.Itoa(shards))
	for _, s := range dynamicSteps {
		e.args = append(e.args, "--set", s+".image="+d.built.Reference)
	}
	return e, store
}

// dynamicRun is a run of the flow under `airflow dags test`: the run's
// state, each task's states by map index, and the pods of each step.
type dynamicRun struct {
	id     string
	state  string
	states map[string][]string
	pods   map[string][]corev1.Pod
	log    string
}

// runAirflowDynamic runs e's DAG with `airflow dags test` against the
// cluster, in namespace ns, with policy for the Airflow home's cluster
// policies.
func runAirflowDynamic(t *testing.T, c *simcluster.Cluster, ns string, e *example, policy ...string) *dynamicRun {
	t.Helper()
	python := airflowtest.Python(t)
	home := airflowHomeDir(t, python)
	dags := t.TempDir()
	if out, err := e.command(t, "compile", "--target", "airflow", "-o", dags).CombinedOutput(); err != nil {
		t.Fatalf("compile --target airflow: %v\n%s", err, out)
	}
	conn, err := json.Marshal(map[string]any{
		"conn_type": "kubernetes",
		"extra":     map[string]any{"in_cluster": false, "kube_config_path": c.Kubeconfig, "namespace": ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	airflowHome.run.Lock()
	defer airflowHome.run.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), airflowRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "airflow", "dags", "test", e.Name)
	cmd.Env = append(append(airflowEnv(home, dags), "AIRFLOW_CONN_KUBERNETES_DEFAULT="+string(conn), envReadLogs+"=1"), policy...)
	began := time.Now()
	out, runErr := cmd.CombinedOutput()
	data, err := exec.Command(python, filepath.Join("testdata", "airflow", "runstates.py"), filepath.Join(home, "airflow.db"), e.Name).Output()
	log := tail(string(out), 80)
	var rs runStates
	if err == nil {
		err = json.Unmarshal(data, &rs)
	}
	if err != nil || rs.Error != "" || rs.Start == nil || rs.Start.Before(began) {
		t.Fatalf("runstates.py: %v %s (the latest run started at %v)\nairflow dags test (%v):\n%s", err, rs.Error, rs.Start, runErr, log)
	}
	r := &dynamicRun{id: rs.RunID, state: rs.State, states: map[string][]string{}, pods: map[string][]corev1.Pod{}, log: log}
	for _, ti := range rs.Tasks {
		state := "none"
		if ti.State != nil {
			state = *ti.State
		}
		r.states[ti.TaskID] = append(r.states[ti.TaskID], state)
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "manifold.dev/flow=dynamic"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		s := p.Labels["manifold.dev/step"]
		r.pods[s] = append(r.pods[s], p)
	}
	return r
}

// TestRealDynamicAirflow runs examples/dynamic under Airflow (`airflow dags
// test`, KubernetesPodOperator) on a real node, its artifacts in S3, with 0,
// 1 and 3 shards, and with 3 where shard 1 fails once: the producing steps'
// values reach Airflow through the XCom sidecar, process runs one mapped
// task instance per shard (none for 0, and the run still succeeds: pick sees
// no rows), the branch not taken is skipped, report joins the one taken, and
// every artifact is the bytes this machine's run put. The shard that failed
// runs again, alone: it has two pods, the others one.
func TestRealDynamicAirflow(t *testing.T) {
	d := newDynamicCluster(t)
	for _, tc := range []struct {
		name   string
		shards int
		fail   string // "STEP INDEX" to fail once
	}{
		{"shards-0", 0, ""},
		{"shards-1", 1, ""},
		{"shards-3", 3, ""},
		{"retry", 3, "process 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := d.local(t, tc.shards)
			e, store := d.onCluster(t, "dynamic-airflow-"+tc.name, tc.shards)
			var policy []string
			if tc.fail != "" {
				file := filepath.Join(t.TempDir(), "fail-once")
				if err := os.WriteFile(file, []byte(tc.fail), 0o644); err != nil {
					t.Fatal(err)
				}
				policy = append(policy, envExitOnce+"="+file)
			}
			r := runAirflowDynamic(t, d.c, store.ns, e, policy...)
			if r.state != "success" {
				t.Fatalf("DAG run ended %q: %v\n%s", r.state, r.states, r.log)
			}
			checkDynamicStates(t, r, tc.shards)
			checkDynamicPods(t, d, r, tc.shards, tc.fail != "")
			got := map[string][]byte{}
			for key, data := range store.read(t) {
				if k, ok := strings.CutPrefix(key, "dynamic/"+r.id+"/"); ok {
					got[k] = data
				}
			}
			if diff := cmp.Diff(stringsOf(want), stringsOf(got)); diff != "" {
				t.Errorf("the run's artifacts differ from this machine's run's (-local +airflow):\n%s", diff)
			}
		})
	}
}

// checkDynamicStates checks each task's states: every item of process
// succeeded, the branch its total picks ran and the other was skipped.
func checkDynamicStates(t *testing.T, r *dynamicRun, shards int) {
	t.Helper()
	taken, other := "small", "large"
	if 10*shards*(shards+1)/2 >= 50 {
		taken, other = "large", "small"
	}
	want := map[string][]string{
		"list": {"success"}, "process_items": {"success"}, "pick": {"success"},
		taken + "_when": {"success"}, taken: {"success"},
		other + "_when": {"skipped"}, other: {"skipped"},
		"report": {"success"},
	}
	want["process"] = slices.Repeat([]string{"success"}, shards)
	if shards == 0 {
		want["process"] = []string{"skipped"} // mapped over no item
	}
	if diff := cmp.Diff(want, r.states); diff != "" {
		t.Errorf("task states (-want +got):\n%s\n%s", diff, r.log)
	}
}

// checkDynamicPods checks that every pod ran on the real node, and that
// process ran one pod per shard, with its index and the count, but two for
// shard 1 when it failed once.
func checkDynamicPods(t *testing.T, d *dynamicCluster, r *dynamicRun, shards int, failedOnce bool) {
	t.Helper()
	perIndex := map[string]int{}
	for step, pods := range r.pods {
		for _, p := range pods {
			if p.Spec.NodeName != d.node.Name {
				t.Errorf("step %s pod %s ran on node %s, want the real node %s", step, p.Name, p.Spec.NodeName, d.node.Name)
			}
			if step != "process" {
				continue
			}
			perIndex[envOf(t, p, plan.EnvIndex)]++
			if got := envOf(t, p, plan.EnvCount); got != strconv.Itoa(shards) {
				t.Errorf("process pod %s: %s=%q, want %d", p.Name, plan.EnvCount, got, shards)
			}
		}
	}
	want := map[string]int{}
	for i := range shards {
		want[strconv.Itoa(i)] = 1
	}
	if failedOnce {
		want["1"] = 2
	}
	if diff := cmp.Diff(want, perIndex); diff != "" {
		t.Errorf("process pods by %s (-want +got):\n%s", plan.EnvIndex, diff)
	}
}

// stringsOf is m with its values as text, for diffs.
func stringsOf(m map[string][]byte) map[string]string {
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = string(m[k])
	}
	return out
}
