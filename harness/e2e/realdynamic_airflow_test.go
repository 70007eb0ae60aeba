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
func newDynamicCluster(t testing.TB) *dynamicCluster {
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
func (d *dynamicCluster) local(t testing.TB, shards int) map[string][]byte {
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

// onCluster is examples/dynamic with shards on the cluster (onClusterFlow).
func (d *dynamicCluster) onCluster(t testing.TB, bucket string, shards int) (e *example, ns string) {
	t.Helper()
	return d.onClusterFlow(t, "dynamic", dynamicSteps, bucket, "shards="+strconv.Itoa(shards))
}

// onClusterFlow is flow, of steps, with params on the cluster, its image the
// one built, in a namespace of its own, its artifacts in a bucket of its own
// (as s3Store makes one).
func (d *dynamicCluster) onClusterFlow(t testing.TB, flow string, steps []string, bucket string, params ...string) (e *example, ns string) {
	t.Helper()
	ns = d.c.Namespace(t)
	d.srv.Bucket(t, bucket)
	_, err := d.c.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: s3Secret},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": s3test.AccessKey, "AWS_SECRET_ACCESS_KEY": s3test.SecretKey, "AWS_REGION": s3test.Region},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e = &example{Name: flow, bin: d.bin}
	e.config = "host_network = true\nsecrets = [\"" + s3Secret + "\"]\n" + "entrypoint = \"" + d.built.Entrypoint + "\"\n" + realNodeConfig
	e.args = []string{"--artifacts", "s3://" + bucket + "/flows", "--artifacts-endpoint", d.srv.Endpoint}
	for _, p := range params {
		e.args = append(e.args, "--param", p)
	}
	for _, s := range steps {
		e.args = append(e.args, "--set", s+".image="+d.built.Reference)
	}
	return e, ns
}

// artifacts returns what run id of flow put in bucket, by key.
func (d *dynamicCluster) artifacts(t *testing.T, flow, bucket, id string) map[string][]byte {
	t.Helper()
	got := map[string][]byte{}
	prefix := "flows/" + flow + "/" + id + "/"
	for _, key := range d.srv.Keys(t, bucket, prefix) {
		got[strings.TrimPrefix(key, prefix)] = s3Object(t, d.srv, bucket, key)
	}
	return got
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
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: plan.LabelFlow + "=" + e.Name})
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
			bucket := "dynamic-airflow-" + tc.name
			e, ns := d.onCluster(t, bucket, tc.shards)
			var policy []string
			if tc.fail != "" {
				file := filepath.Join(t.TempDir(), "fail-once")
				if err := os.WriteFile(file, []byte(tc.fail), 0o644); err != nil {
					t.Fatal(err)
				}
				policy = append(policy, envExitOnce+"="+file)
			}
			r := runAirflowDynamic(t, d.c, ns, e, policy...)
			if r.state != "success" {
				t.Fatalf("DAG run ended %q: %v\n%s", r.state, r.states, r.log)
			}
			checkDynamicStates(t, r, tc.shards)
			checkDynamicPods(t, d, r, tc.shards, tc.fail != "")
			got := d.artifacts(t, "dynamic", bucket, r.id)
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

// followDynamic deploys e to the Airflow srv and runs it with `trigger
// --wait`, which follows it to its end; it returns the run's record and its
// tasks by label, and how long trigger --wait took.
func followDynamic(t testing.TB, srv *airflowtest.Server, e *example) (*record.Record, map[string]record.Task, time.Duration) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, compile.ConfigFile), []byte(e.config+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "MANIFOLD_AIRFLOW_CONFIG=", "MANIFOLD_AIRFLOW_TOKEN=",
		"MANIFOLD_AIRFLOW_URL="+srv.URL, "MANIFOLD_AIRFLOW_USERNAME="+airflowtest.Username, "MANIFOLD_AIRFLOW_PASSWORD="+airflowtest.Password)
	run := func(args ...string) string {
		cmd := exec.Command(e.bin, append(args, e.args...)...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s\nAirflow:\n%s", strings.Join(args, " "), err, tail(string(out), 60), srv.LogTails(40))
		}
		return string(out)
	}
	run("deploy", "--target", "airflow", "--dags-folder", srv.Dags, "--wait-parsed")
	began := time.Now()
	out := run("trigger", "--target", "airflow", "--wait")
	took := time.Since(began)
	runs, err := os.ReadDir(filepath.Join(dir, record.DefaultRoot))
	if err != nil || len(runs) != 1 {
		t.Fatalf("trigger --wait recorded %d runs (%v), want 1:\n%s", len(runs), err, out)
	}
	rec, tasks, err := record.Read(filepath.Join(dir, record.DefaultRoot), runs[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	byLabel := map[string]record.Task{}
	for _, tk := range tasks {
		byLabel[tk.Label()] = tk
	}
	return rec, byLabel, took
}

// TestRealDynamicAirflowFollow deploys examples/dynamic to a real Airflow
// (API server, scheduler, DAG processor on loopback), whose pod operators
// run on the real node, and runs it with 3 shards through `trigger --wait`:
// the follower records one task per shard with the shard as its item,
// small as not taken with the dag core's reason, the run as succeeded; its
// artifacts are this machine's run's.
func TestRealDynamicAirflowFollow(t *testing.T) {
	d := newDynamicCluster(t)
	want := d.local(t, 3)
	e, ns := d.onCluster(t, "dynamic-follow", 3)
	srv := airflowtest.StartServer(t, airflowtest.ServerOptions{
		Kubeconfig: d.c.Kubeconfig, Namespace: ns, Policy: airflowtest.PolicyE2E(), Env: []string{envReadLogs + "=1"},
	})
	rec, tasks, _ := followDynamic(t, srv, e)
	if rec.State != record.Succeeded {
		t.Fatalf("run %s: %s (%s)", rec.ID, rec.State, rec.Error)
	}
	for i := range 3 {
		label := "process[" + strconv.Itoa(i) + "]"
		item := `{"name":"shard-` + strconv.Itoa(i) + `","rows":` + strconv.Itoa(10*(i+1)) + `}`
		if tk := tasks[label]; tk.State != record.Succeeded || tk.Item != item || tk.Attempts != 1 {
			t.Errorf("%s: %s, item %q, %d attempts; want succeeded, %q, 1", label, tk.State, tk.Item, tk.Attempts, item)
		}
	}
	if _, ok := tasks["process[3]"]; ok {
		t.Errorf("a fourth item recorded: %v", slices.Sorted(maps.Keys(tasks)))
	}
	why := `not taken: pick's size is "large", and small runs when it is "small"`
	if tk := tasks["small"]; tk.State != record.Skipped || tk.Reason != "NotTaken" || tk.Error != why {
		t.Errorf("small: %s, reason %q, %q; want skipped, NotTaken, %q", tk.State, tk.Reason, tk.Error, why)
	}
	for _, s := range []string{"list", "pick", "large", "report"} {
		if tk := tasks[s]; tk.State != record.Succeeded {
			t.Errorf("%s: %s, want succeeded", s, tk.State)
		}
	}
	if diff := cmp.Diff(stringsOf(want), stringsOf(d.artifacts(t, "dynamic", "dynamic-follow", rec.ID))); diff != "" {
		t.Errorf("the run's artifacts differ from this machine's run's (-local +airflow):\n%s", diff)
	}
}

// envBenchItems sets how many items BenchmarkAirflowDynamicFanOut fans out
// over (default 1,000).
const envBenchItems = "MANIFOLD_BENCH_AIRFLOW_ITEMS"

// BenchmarkAirflowDynamicFanOut runs examples/dynamic on a real Airflow whose
// pod operators run every pod on the real node (and delete those that
// succeeded, as the DAG says), fanning out over
// MANIFOLD_BENCH_AIRFLOW_ITEMS shards (1,000 unless set), through deploy and
// `trigger --wait`: it reports the time from the trigger to the run's
// success, and items per second.
func BenchmarkAirflowDynamicFanOut(b *testing.B) {
	items := 1000
	if v := os.Getenv(envBenchItems); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			b.Fatalf("%s=%q: want a count", envBenchItems, v)
		}
		items = n
	}
	d := newDynamicCluster(b)
	e, ns := d.onCluster(b, "dynamic-bench", items)
	// The DAG as it is deployed: the operators read each pod's log and
	// delete the pods that succeeded.
	srv := airflowtest.StartServer(b, airflowtest.ServerOptions{Kubeconfig: d.c.Kubeconfig, Namespace: ns})
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		rec, _, took := followDynamic(b, srv, e)
		if rec.State != record.Succeeded {
			b.Fatalf("run %s: %s (%s)", rec.ID, rec.State, rec.Error)
		}
		total += took
	}
	runs := float64(b.N)
	b.ReportMetric(total.Seconds()/runs, "s/run")
	b.ReportMetric(float64(items)*runs/total.Seconds(), "items/s")
	b.ReportMetric(float64(items), "items")
}
