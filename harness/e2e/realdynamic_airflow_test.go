package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/benchenv"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// xcomSidecarImage is the image of KubernetesPodOperator's XCom sidecar
// (its default): the real node pulls it, through the mirror of docker.io,
// from the loopback registry, where a busybox stands in for it.
const xcomSidecarImage = "alpine:3.24.2"

// dynamicAirflow is a real Airflow (API server, scheduler and DAG processor on
// loopback) whose pod operators run on the real node, in the namespace of
// examples/dynamic's store, with the example deployed to it: every case of
// the airflow subtest is a run of that one DAG.
type dynamicAirflow struct {
	srv   *airflowtest.Server
	e     *example
	store realStore
	// work is where the manifold commands run (their manifold.toml, the
	// records of the runs followed); env runs them, with the server's
	// credentials.
	work string
	env  []string
	// timeout bounds each command (airflowRunTimeout unless set).
	timeout time.Duration
}

// startAirflow starts the Airflow, pushes the XCom sidecar's image, and
// deploys examples/dynamic to the Airflow (deploy --wait-parsed), its
// artifacts in a bucket of its own. With readLogs, the pod operators read each
// pod's log and keep the pods (the end-to-end tests' cluster policies);
// without, the DAG runs as deployed, deleting the pods that succeeded.
func (d *dynamicSetup) startAirflow(t testing.TB, bucket string, readLogs bool) *dynamicAirflow {
	t.Helper()
	e, store := d.onCluster(t, bucket)
	d.c.PushBusybox(t, xcomSidecarImage)
	a := &dynamicAirflow{store: store, timeout: airflowRunTimeout}
	o := airflowtest.ServerOptions{Kubeconfig: d.c.Kubeconfig, Namespace: store.ns}
	if readLogs {
		o.Policy, o.Env = airflowtest.PolicyE2E(), []string{envReadLogs + "=1"}
	}
	a.srv = airflowtest.StartServer(t, o)
	a.env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir(), "MANIFOLD_AIRFLOW_CONFIG=", "MANIFOLD_AIRFLOW_TOKEN=",
		"MANIFOLD_AIRFLOW_URL="+a.srv.URL, "MANIFOLD_AIRFLOW_USERNAME="+airflowtest.Username, "MANIFOLD_AIRFLOW_PASSWORD="+airflowtest.Password)
	return a.with(t, e)
}

// with is the Airflow with flow e, whose artifacts go to the same store,
// deployed to it (deploy --wait-parsed), its commands run in a directory of
// its own.
func (a *dynamicAirflow) with(t testing.TB, e *example) *dynamicAirflow {
	t.Helper()
	b := *a
	b.e, b.work = e, t.TempDir()
	if err := os.WriteFile(filepath.Join(b.work, compile.ConfigFile), []byte(e.config+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.manifold(t, "deploy", "--target", "airflow", "--dags-folder", b.srv.Dags, "--wait-parsed")
	return &b
}

// manifold runs the example's program with args and its own options in
// a.work, and returns its output; it fails t, with the Airflow's logs, when
// the command fails or takes longer than a.timeout.
func (a *dynamicAirflow) manifold(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), a.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.e.bin, append(args, a.e.args...)...)
	cmd.Dir, cmd.Env = a.work, a.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s\nAirflow:\n%s", strings.Join(args, " "), err, tail(string(out), 60), a.srv.LogTails(40))
	}
	return string(out)
}

var triggeredRun = regexp.MustCompile(`triggered run (\S+) of DAG`)

// trigger runs the DAG with params through `trigger --wait`, which follows it
// to its end, and returns the run's record, its tasks by label, and how long
// trigger --wait took.
func (a *dynamicAirflow) trigger(t testing.TB, params []string) (*record.Record, map[string]record.Task, time.Duration) {
	t.Helper()
	began := time.Now()
	out := a.manifold(t, append([]string{"trigger", "--target", "airflow", "--wait"}, paramArgs(params)...)...)
	took := time.Since(began)
	m := triggeredRun.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("trigger printed no run:\n%s", out)
	}
	rec, tasks, err := record.Read(filepath.Join(a.work, record.DefaultRoot), m[1])
	if err != nil {
		t.Fatal(err)
	}
	byLabel := map[string]record.Task{}
	for _, tk := range tasks {
		byLabel[tk.Label()] = tk
	}
	return rec, byLabel, took
}

// runAirflow triggers case tc on the Airflow and checks what the follower
// recorded against the run on this machine: the run succeeded, one task per
// shard with the shard as its item, in two attempts for the one that fails
// once, and the branch not taken skipped with the dag core's reason. It
// returns the run's artifacts and the pods of process's items by
// MANIFOLD_INDEX.
func (d *dynamicSetup) runAirflow(t *testing.T, a *dynamicAirflow, tc dynamicCase) dynamicRun {
	rec, tasks, _ := a.trigger(t, tc.params)
	if rec.State != record.Succeeded {
		t.Fatalf("run %s: %s (%s)", rec.ID, rec.State, rec.Error)
	}
	local := d.local[tc.name].artifacts
	var shards []json.RawMessage
	var taken string
	if err := json.Unmarshal(local["list/shards.json"], &shards); err != nil {
		t.Fatalf("list's shards on this machine: %v", err)
	}
	if err := json.Unmarshal(local["pick/size.json"], &taken); err != nil {
		t.Fatalf("pick's size on this machine: %v", err)
	}
	for i, shard := range shards {
		label := "process[" + strconv.Itoa(i) + "]"
		var compact bytes.Buffer
		if err := json.Compact(&compact, shard); err != nil {
			t.Fatal(err)
		}
		item := sdk.ItemText(compact.Bytes())
		attempts := 1 + bool2int(strconv.Itoa(i) == tc.failed)
		if tk := tasks[label]; tk.State != record.Succeeded || tk.Item != item || tk.Attempts != attempts {
			t.Errorf("%s: %s, item %q, %d attempts; want succeeded, %q, %d", label, tk.State, tk.Item, tk.Attempts, item, attempts)
		}
	}
	if tk, ok := tasks["process["+strconv.Itoa(len(shards))+"]"]; ok {
		t.Errorf("an item past the %d shards recorded: %+v", len(shards), tk)
	}
	other := map[string]string{"large": "small", "small": "large"}[taken]
	why := `not taken: pick's size is "` + taken + `", and ` + other + ` runs when it is "` + other + `"`
	if tk := tasks[other]; tk.State != record.Skipped || tk.Reason != "NotTaken" || tk.Error != why {
		t.Errorf("%s: %s, reason %q, %q; want skipped, NotTaken, %q", other, tk.State, tk.Reason, tk.Error, why)
	}
	for _, s := range []string{"list", "pick", taken, "report"} {
		if tk := tasks[s]; tk.State != record.Succeeded {
			t.Errorf("%s: %s, want succeeded", s, tk.State)
		}
	}

	run := dynamicRun{artifacts: map[string][]byte{}, items: map[string][]corev1.Pod{}}
	for key, data := range a.store.read(t) {
		if rest, ok := strings.CutPrefix(key, "dynamic/"+rec.ID+"/"); ok {
			run.artifacts[rest] = data
		}
	}
	pods, err := d.c.Client.CoreV1().Pods(a.store.ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: "run_id=" + rec.ID + "," + plan.LabelStep + "=process"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		i := envOf(t, p, plan.EnvIndex)
		run.items[i] = append(run.items[i], p)
		if got := envOf(t, p, plan.EnvCount); got != strconv.Itoa(len(shards)) {
			t.Errorf("process pod %s: %s=%q, want %d", p.Name, plan.EnvCount, got, len(shards))
		}
	}
	return run
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
	items := benchenv.Int(b, envBenchItems, 1000, 0)
	d := newDynamicSetup(b)
	a := d.startAirflow(b, "dynamic-bench", false)
	a.timeout = 3 * time.Hour
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		rec, _, took := a.trigger(b, []string{"shards=" + strconv.Itoa(items)})
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
