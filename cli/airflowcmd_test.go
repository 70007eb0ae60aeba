//go:build !manifold_image

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/otlptest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/airflow"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
	"github.com/manifoldflow/manifold/sdk"
)

// airflowArgs turns a command of the Airflow tests (deploy, undeploy,
// trigger, list, show, logs, stop, retry) and its arguments into the flow
// program's command line with --target airflow.
func airflowArgs(args []string) []string {
	cmd := []string{args[0]}
	switch args[0] {
	case "list", "show":
		cmd = []string{"runs", args[0]}
	}
	return append(append(cmd, "--target", "airflow"), args[1:]...)
}

// afResult is what one command printed and its exit status.
type afResult struct {
	stdout, stderr string
	code           int
}

// runAF runs one Airflow command of flow and returns what it printed and its
// exit status, as cli.Run would.
func runAF(t *testing.T, flow *sdk.Flow, p *plan.Flow, args ...string) afResult {
	t.Helper()
	return runAFContext(t.Context(), t, flow, p, args...)
}

// runAFContext is runAF with a context that interrupts the command.
// A command that takes longer than afCommandTimeout is interrupted and fails the
// test, so that a run Airflow never ends fails with its logs (the server's are
// printed when a test fails) rather than hanging the test binary until its
// timeout, which prints none.
func runAFContext(ctx context.Context, t *testing.T, flow *sdk.Flow, p *plan.Flow, args ...string) afResult {
	t.Helper()
	return runAFWatch(ctx, t, flow, p, nil, args...)
}

// runAFWatch is runAFContext that also writes the command's output, as it
// comes, to watch, when it is not nil.
func runAFWatch(ctx context.Context, t *testing.T, flow *sdk.Flow, p *plan.Flow, watch io.Writer, args ...string) afResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, afCommandTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	var stdout io.Writer = &out
	if watch != nil {
		stdout = io.MultiWriter(&out, watch)
	}
	began := time.Now()
	code := Run(ctx, flow, append([]string{flow.Name()}, airflowArgs(args)...), stdout, &errOut)
	r := afResult{stdout: out.String(), stderr: errOut.String(), code: code}
	t.Logf("%s %s: exit %d in %s\nstdout:\n%s\nstderr:\n%s", flow.Name(), strings.Join(args, " "), r.code, time.Since(began).Round(10*time.Millisecond), r.stdout, r.stderr)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Errorf("%s %s did not end within %s: interrupted", flow.Name(), strings.Join(args, " "), afCommandTimeout)
	}
	return r
}

// afCommandTimeout bounds each command of the Airflow tests; the slowest, a
// trigger --wait of a three-step run, takes well under a minute.
const afCommandTimeout = 5 * time.Minute

var triggeredRE = regexp.MustCompile(`triggered run (\S+) of DAG`)

// triggeredRun returns the run id a trigger printed.
func triggeredRun(t *testing.T, r afResult) string {
	t.Helper()
	m := triggeredRE.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("trigger printed no run id:\n%s%s", r.stdout, r.stderr)
	}
	return m[1]
}

// readRun reads a followed run's record in the working directory.
func readRun(t *testing.T, id string) (*record.Record, map[string]record.Task) {
	t.Helper()
	rec, tasks, err := record.Read(record.DefaultRoot, id)
	if err != nil {
		t.Fatalf("run %s's record: %v", id, err)
	}
	byLabel := map[string]record.Task{}
	for _, tk := range tasks {
		byLabel[tk.Label()] = tk
	}
	return rec, byLabel
}

// chainFlow is a flow of three Command steps, a → b → c, whose pods kwok runs;
// each step runs for runFor ("" for at once), and b has options bOpts too.
func chainFlow(name, runFor string, bOpts ...sdk.StepOption) *sdk.Flow {
	opts := func(after string, more ...sdk.StepOption) []sdk.StepOption {
		o := append([]sdk.StepOption{sdk.Command("true")}, more...)
		if after != "" {
			o = append(o, sdk.After(after))
		}
		if runFor != "" {
			o = append(o, sdk.Label(simcluster.LabelRunFor, runFor))
		}
		return o
	}
	return sdk.NewFlow(name, sdk.Image("registry.example.com/ml/"+name+":v1"), sdk.Param("size", "small")).
		Step("a", opts("")...).
		Step("b", opts("a", bOpts...)...).
		Step("c", opts("b")...)
}

// TestAirflowLifecycle runs flows on a real Airflow 3 (API server, scheduler
// and DAG processor on loopback, SQLite, the simple auth manager), whose pod
// operators run their pods on the simulated cluster: deploy --wait-parsed,
// trigger --wait, a failing step named, retry, stop, runs list and show, logs,
// an import error, and the trace of a followed run.
func TestAirflowLifecycle(t *testing.T) {
	cluster := simcluster.Shared(t)
	ns := cluster.Namespace(t)
	failFile := filepath.Join(t.TempDir(), "fail-step")
	srv := airflowtest.StartServer(t, airflowtest.ServerOptions{
		Kubeconfig: cluster.Kubeconfig, Namespace: ns, Policy: airflowtest.PolicyE2E(),
		Env: []string{"MANIFOLD_SIMFAIL_STEP_FILE=" + failFile, "MANIFOLD_REJECT_DAG=afrejected"},
	})
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(airflow.EnvConfig, "")
	t.Setenv(airflow.EnvToken, "")
	t.Setenv(airflow.EnvURL, srv.URL)
	t.Setenv(airflow.EnvUsername, airflowtest.Username)
	t.Setenv(airflow.EnvPassword, airflowtest.Password)
	dags := []string{"--dags-folder", srv.Dags}

	t.Run("success", func(t *testing.T) {
		rcv := otlptest.New(t)
		rcv.Env(t)
		flow := chainFlow("afok", "", sdk.Foreach("x", "y"))
		p := testflows.Compile(t, flow)
		if r := runAF(t, flow, p, append([]string{"deploy", "--wait-parsed"}, dags...)...); r.code != 0 || !strings.Contains(r.stdout, "Airflow imported DAG afok") {
			t.Fatalf("deploy --wait-parsed: exit %d, want 0 and the DAG imported", r.code)
		}
		for _, name := range []string{"afok.py", "afok.kpo.json"} {
			if _, err := os.Stat(filepath.Join(srv.Dags, name)); err != nil {
				t.Errorf("deploy left no %s: %v", name, err)
			}
		}
		leftovers, _ := filepath.Glob(filepath.Join(srv.Dags, ".*.tmp"))
		if len(leftovers) > 0 {
			t.Errorf("deploy left temporary files: %v", leftovers)
		}
		r := runAF(t, flow, p, "trigger", "--wait", "--param", "size=large")
		if r.code != 0 {
			t.Fatalf("trigger --wait: exit %d, want 0", r.code)
		}
		if strings.Contains(r.stderr, "is not flow afok as it compiles now") {
			t.Errorf("trigger of the DAG just deployed says it is stale")
		}
		id := triggeredRun(t, r)
		rec, tasks := readRun(t, id)
		if rec.State != record.Succeeded || rec.Runtime != record.Airflow || rec.Cluster != srv.URL || rec.Params["size"] != "large" {
			t.Errorf("record: state %s, runtime %q, at %q, params %v; want succeeded, airflow, %s, size=large", rec.State, rec.Runtime, rec.Cluster, rec.Params, srv.URL)
		}
		if len(tasks) != 4 {
			t.Errorf("record holds %d tasks, want a, b[0], b[1] and c", len(tasks))
		}
		for label, item := range map[string]string{"a": "", "b[0]": "x", "b[1]": "y", "c": ""} {
			if tk := tasks[label]; tk.State != record.Succeeded || tk.Attempts != 1 || tk.Item != item {
				t.Errorf("%s: %s after %d attempts, item %q; want succeeded after 1, item %q", label, tk.State, tk.Attempts, tk.Item, item)
			}
		}
		for s, n := range map[string]int{"a": 1, "b": 2, "c": 1} {
			pods, err := cluster.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: plan.LabelFlow + "=afok," + plan.LabelStep + "=" + s})
			if err != nil || len(pods.Items) != n {
				t.Errorf("step %s: %d pods, %v; want the %d its tasks ran", s, len(pods.Items), err, n)
			}
		}
		for _, b := range []string{"b[0]", "b[1]"} {
			if tasks["a"].End.After(tasks[b].Start) || tasks[b].End.After(tasks["c"].Start) {
				t.Errorf("steps out of order: a %v–%v, %s %v–%v, c %v", tasks["a"].Start, tasks["a"].End, b, tasks[b].Start, tasks[b].End, tasks["c"].Start)
			}
		}

		// The trace of the followed run.
		spans := waitSpans(t, rcv, 10)
		want := `run afok manifold.result=succeeded [Ok]
  step a manifold.attempts=1 manifold.result=succeeded [Ok]
    attempt 1 manifold.attempt=1 manifold.result=succeeded [Ok]
  step b manifold.result=succeeded [Ok]
    item b[0] manifold.attempts=1 manifold.result=succeeded [Ok]
      attempt 1 manifold.attempt=1 manifold.result=succeeded [Ok]
    item b[1] manifold.attempts=1 manifold.result=succeeded [Ok]
      attempt 1 manifold.attempt=1 manifold.result=succeeded [Ok]
  step c manifold.attempts=1 manifold.result=succeeded [Ok]
    attempt 1 manifold.attempt=1 manifold.result=succeeded [Ok]
`
		keys := []string{tracing.AttrAttempt, tracing.AttrAttempts, tracing.AttrResult}
		if got := otlptest.Tree(spans, keys, false); got != want {
			t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
		}
		traceID := ""
		for _, s := range spans {
			if s.Name == "run afok" && (s.Attrs[tracing.AttrRuntime] != "airflow" || s.Attrs[tracing.AttrRunID] != id) {
				t.Errorf("run span attributes %v; want runtime airflow, run %s", s.Attrs, id)
			}
			if s.Name == "run afok" {
				traceID = s.TraceID
			}
		}
		// Every step's pod continues the run's trace.
		pods, err := cluster.Client.CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{LabelSelector: plan.LabelFlow + "=afok"})
		if err != nil || len(pods.Items) == 0 {
			t.Fatalf("the run's pods: %v, %v", pods, err)
		}
		for _, pod := range pods.Items {
			tp := podEnv(pod, plan.EnvTraceParent)
			if parts := strings.Split(tp, "-"); len(parts) != 4 || parts[1] != traceID {
				t.Errorf("pod %s: TRACEPARENT %q; want a W3C trace context in the run's trace %s", pod.Name, tp, traceID)
			}
		}

		// runs list, runs show and logs read the run back from Airflow.
		if r := runAF(t, flow, p, "list"); r.code != 0 || !regexp.MustCompile(regexp.QuoteMeta(id)+`\s+succeeded`).MatchString(r.stdout) {
			t.Errorf("runs list: exit %d; want run %s succeeded in:\n%s", r.code, id, r.stdout)
		}
		r = runAF(t, flow, p, "show", id)
		if r.code != 0 || !strings.Contains(r.stdout, "run "+id+" of flow afok: succeeded\non Airflow "+srv.URL+"\n") || !strings.Contains(r.stdout, "params size=large") {
			t.Errorf("runs show: exit %d; want the run succeeded with size=large", r.code)
		}
		// latest is the DAG's run that started last: this one.
		if r := runAF(t, flow, p, "show", "latest"); r.code != 0 || !strings.HasPrefix(r.stdout, "run "+id+" of flow afok: succeeded\n") {
			t.Errorf("runs show latest: exit %d; want run %s, in:\n%s%s", r.code, id, r.stdout, r.stderr)
		}
		// -o json reads the run back from Airflow as a RunList and a Run.
		if r := runAF(t, flow, p, "list", "-o", "json"); r.code != 0 {
			t.Errorf("runs list -o json: exit %d:\n%s", r.code, r.stderr)
		} else {
			var list output.RunList
			strictJSON(t, r.stdout, &list)
			i := slices.IndexFunc(list.Items, func(s output.RunSummary) bool { return s.ID == id })
			if list.Kind != output.KindRunList || i < 0 || list.Items[i].State != record.Succeeded || list.Items[i].Runtime != string(record.Airflow) || list.Items[i].Start == nil {
				t.Errorf("runs list -o json: want run %s succeeded on airflow, with its start, in:\n%s", id, r.stdout)
			}
		}
		if r := runAF(t, flow, p, "show", "-o", "json", id); r.code != 0 {
			t.Errorf("runs show -o json: exit %d:\n%s", r.code, r.stderr)
		} else {
			var run output.Run
			strictJSON(t, r.stdout, &run)
			if run.Kind != output.KindRun || run.ID != id || run.State != record.Succeeded || run.Params["size"] != "large" || len(run.Tasks) != 4 {
				t.Errorf("runs show -o json: want run %s succeeded with size=large and 4 tasks:\n%s", id, r.stdout)
			}
			for _, tk := range run.Tasks {
				if tk.State != record.Succeeded || tk.Attempts != 1 {
					t.Errorf("runs show -o json: task %s%v: %s after %d attempts; want succeeded after 1", tk.Step, tk.Index, tk.State, tk.Attempts)
				}
			}
		}
		if strings.Contains(r.stdout, emitairflow.ConfTraceParent) {
			t.Errorf("runs show shows the reserved %s among the params:\n%s", emitairflow.ConfTraceParent, r.stdout)
		}
		for _, row := range []string{`a\s+succeeded`, `b\[0\]\s+x\s+succeeded`, `b\[1\]\s+y\s+succeeded`, `c\s+succeeded`} {
			if !regexp.MustCompile(`(?m)^` + row + `\s+1\s`).MatchString(r.stdout) {
				t.Errorf("runs show: no row %s in 1 attempt", row)
			}
		}
		r = runAF(t, flow, p, "logs", id, "b")
		for _, b := range []string{"b[0]", "b[1]"} {
			if r.code != 0 || !strings.Contains(r.stdout, b+" | ") || !regexp.MustCompile(regexp.QuoteMeta(b)+` \|.*Building pod afok-b-`).MatchString(r.stdout) {
				t.Errorf("logs RUN b: exit %d; want %s's task log, naming its pod afok-b-…", r.code, b)
			}
		}
		if r := runAF(t, flow, p, "logs", id, "nosuch"); r.code != ExitUsage {
			t.Errorf("logs RUN nosuch: exit %d, want %d", r.code, ExitUsage)
		}

		// undeploy removes what deploy wrote, and nothing else.
		other := filepath.Join(srv.Dags, "notmanifold.py")
		if err := os.WriteFile(other, []byte("# a DAG of someone else\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runAF(t, flow, p, append([]string{"undeploy", "--delete-dag"}, dags...)...); r.code != 0 {
			t.Errorf("undeploy: exit %d, want 0", r.code)
		}
		entries, _ := os.ReadDir(srv.Dags)
		var left []string
		for _, e := range entries {
			left = append(left, e.Name())
		}
		if strings.Join(left, " ") != "notmanifold.py" {
			t.Errorf("dags folder after undeploy: %v; want only notmanifold.py", left)
		}
		if err := os.Remove(other); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fail-retry", func(t *testing.T) {
		// b is retried once by Airflow, a second after its first try.
		flow := chainFlow("affail", "", sdk.Retry(1), sdk.RetryBackoff(time.Second))
		p := testflows.Compile(t, flow)
		if err := os.WriteFile(failFile, []byte("b"), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runAF(t, flow, p, append([]string{"deploy", "--wait-parsed"}, dags...)...); r.code != 0 {
			t.Fatalf("deploy --wait-parsed: exit %d", r.code)
		}
		r := runAF(t, flow, p, "trigger", "--wait")
		id := triggeredRun(t, r)
		if !regexp.MustCompile(`(?m)b: attempt 1 failed: task b failed in try 1: AirflowException: .*; retrying$`).MatchString(r.stdout) {
			t.Errorf("trigger --wait did not tell b's first attempt failed and that it is retried")
		}
		if r.code != ExitInvalid || !regexp.MustCompile(`error: step b failed: task b failed in try 2: AirflowException: Pod affail-b-\S+ returned a failure. failed by the sim.manifold.dev/fail label;`).MatchString(r.stderr) || !strings.Contains(r.stderr, "not started: c") {
			t.Errorf("trigger --wait: exit %d; want %d, step b named as failed and c not started", r.code, ExitInvalid)
		}
		if !strings.Contains(r.stderr, "of the log of b, try 2") || !strings.Contains(r.stderr, "b |   AirflowException: Pod affail-b-") || strings.Contains(r.stderr, "remote_pod") {
			t.Errorf("trigger --wait printed no log of b's failed try, or printed its pod whole")
		}
		rec, tasks := readRun(t, id)
		if rec.State != record.Failed || tasks["a"].State != record.Succeeded || tasks["b"].State != record.Failed || tasks["b"].Attempts != 2 || tasks["c"].State != record.Skipped {
			t.Errorf("record: run %s, a %s, b %s after %d attempts, c %s; want failed, succeeded, failed after 2, skipped", rec.State, tasks["a"].State, tasks["b"].State, tasks["b"].Attempts, tasks["c"].State)
		}
		logData, err := os.ReadFile(filepath.Join(record.StateDir(filepath.Join(record.DefaultRoot, id), "b", -1), record.StdoutLog))
		if err != nil || !bytes.Contains(logData, []byte("affail-b")) {
			t.Errorf("b's recorded log: %v; want its task's log", err)
		}

		// The cause removed, retry runs b and c again in the same run.
		if err := os.WriteFile(failFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r = runAF(t, flow, p, "retry", id)
		if r.code != 0 || !strings.Contains(r.stdout, "cleared 2 tasks of run "+id+": b, c") {
			t.Fatalf("retry: exit %d; want 0, b and c cleared", r.code)
		}
		rec, tasks = readRun(t, id)
		if rec.State != record.Succeeded {
			t.Errorf("record after retry: %s, want succeeded", rec.State)
		}
		// Airflow counts b's tries on: the third succeeds.
		for s, attempts := range map[string]int{"a": 1, "b": 3, "c": 1} {
			if tk := tasks[s]; tk.State != record.Succeeded || tk.Attempts != attempts {
				t.Errorf("step %s after retry: %s after %d attempts; want succeeded after %d", s, tk.State, tk.Attempts, attempts)
			}
		}
		if r := runAF(t, flow, p, "retry", id); r.code != ExitInvalid || !strings.Contains(r.stderr, "no failed task to retry") {
			t.Errorf("retry of a run that succeeded: exit %d; want %d, nothing to retry", r.code, ExitInvalid)
		}
		r = runAF(t, flow, p, "logs", "--attempt", "2", id, "b")
		if r.code != 0 || !strings.Contains(r.stdout, "'try_number': '2'") || !strings.Contains(r.stdout, "returned a failure") {
			t.Errorf("logs --attempt 2 RUN b: exit %d; want the second try's log, which failed", r.code)
		}
		r = runAF(t, flow, p, "logs", id, "b")
		if r.code != 0 || strings.Count(r.stdout, "--- try ") != 3 {
			t.Errorf("logs RUN b: exit %d; want the logs of b's 3 tries", r.code)
		}
	})

	t.Run("stop", func(t *testing.T) {
		flow := chainFlow("afstop", "10m")
		p := testflows.Compile(t, flow)
		if r := runAF(t, flow, p, append([]string{"deploy", "--wait-parsed"}, dags...)...); r.code != 0 {
			t.Fatalf("deploy --wait-parsed: exit %d", r.code)
		}
		cl, err := airflow.New(airflow.Config{URL: srv.URL, Username: airflowtest.Username, Password: airflowtest.Password})
		if err != nil {
			t.Fatal(err)
		}

		// Interrupted with --on-interrupt leave, the follow ends and the run
		// goes on; retry follows it again, and sees it stopped.
		r, id := interruptedTrigger(t, cl, flow, p, "leave")
		if r.code != ExitInterrupted || !strings.Contains(r.stderr, "run "+id+" goes on in Airflow") {
			t.Errorf("trigger --wait --on-interrupt leave, interrupted: exit %d; want %d, the run going on", r.code, ExitInterrupted)
		}
		if run, err := cl.Run(t.Context(), "afstop", id); err != nil || run.State != airflow.RunRunning {
			t.Errorf("run after leaving it: %v, %v; want running", run, err)
		}
		if rec, _ := readRun(t, id); rec.State != record.Interrupted || !strings.Contains(rec.Error, "goes on in Airflow") {
			t.Errorf("record after leaving the run: %s, %q; want interrupted, going on in Airflow", rec.State, rec.Error)
		}
		// a's pod runs (for 10 minutes, on kwok).
		sel := metav1.ListOptions{LabelSelector: "run_id=" + id + "," + plan.LabelStep + "=a"}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(500 * time.Millisecond) {
			pods, err := cluster.Client.CoreV1().Pods(ns).List(t.Context(), sel)
			if err == nil && len(pods.Items) == 1 {
				// Untraced, the step's TRACEPARENT is empty.
				if tp := podEnv(pods.Items[0], plan.EnvTraceParent); tp != "" {
					t.Errorf("a's pod of an untraced run: TRACEPARENT %q; want empty", tp)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a's pod of run %s: %v, %v; want one", id, pods, err)
			}
		}
		// The run is stopped once retry has found it running and follows it;
		// stopped sooner, retry would find a failed run and run it again.
		refollow := make(chan afResult, 1)
		following := newSeen("following it (nothing to clear)")
		go func() { refollow <- runAFWatch(t.Context(), t, flow, p, following, "retry", id) }()
		select {
		case <-following.c:
		case r := <-refollow:
			t.Fatalf("retry of a running run ended before it followed the run: exit %d", r.code)
		}
		if r := runAF(t, flow, p, "stop", id); r.code != 0 || !strings.Contains(r.stdout, "marked run "+id+" of DAG afstop failed") {
			t.Fatalf("stop: exit %d", r.code)
		}
		if run, err := cl.Run(t.Context(), "afstop", id); err != nil || run.State != airflow.RunFailed {
			t.Errorf("run after stop: %v, %v; want failed", run, err)
		}
		states := waitTask(t, cl, "afstop", id, "a", "failed")
		if states["b"] != "skipped" && states["b"] != "none" {
			t.Errorf("b after stop: %s; want skipped (or none)", states["b"])
		}
		// a's worker stopped the task, and the pod operator deleted its pod.
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
			pods, err := cluster.Client.CoreV1().Pods(ns).List(t.Context(), sel)
			if err != nil {
				t.Fatal(err)
			}
			left := 0
			for _, pod := range pods.Items {
				if pod.DeletionTimestamp == nil {
					left++
				}
			}
			if left == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("a's pod of the stopped run is still there: %d pods", left)
				break
			}
		}
		r = <-refollow
		if r.code != ExitInvalid || !strings.Contains(r.stdout, "following it (nothing to clear)") || !strings.Contains(r.stderr, "error: step a failed") {
			t.Errorf("retry of a running run that is then stopped: exit %d; want %d, a failed", r.code, ExitInvalid)
		}
		if r := runAF(t, flow, p, "stop", id); r.code != ExitInvalid || !strings.Contains(r.stderr, "already ended") {
			t.Errorf("stop of an ended run: exit %d; want %d", r.code, ExitInvalid)
		}

		// Interrupted with --on-interrupt stop, the run is marked failed.
		r, id = interruptedTrigger(t, cl, flow, p, "stop")
		if r.code != ExitInterrupted || strings.Contains(r.stderr, "goes on in Airflow") || !strings.Contains(r.stderr, "stopped in Airflow") {
			t.Errorf("trigger --wait --on-interrupt stop, interrupted: exit %d; want %d, the run stopped", r.code, ExitInterrupted)
		}
		if run, err := cl.Run(t.Context(), "afstop", id); err != nil || run.State != airflow.RunFailed {
			t.Errorf("run after an interrupt that stops it: %v, %v; want failed", run, err)
		}
		if rec, tasks := readRun(t, id); rec.State != record.Interrupted || tasks["a"].State != record.Interrupted || tasks["c"].State != record.Interrupted {
			t.Errorf("record: run %s, a %s, c %s; want interrupted", rec.State, tasks["a"].State, tasks["c"].State)
		}

		// A flow changed since it was deployed: trigger says so.
		changed := chainFlow("afstop", "9m")
		r = runAF(t, changed, testflows.Compile(t, changed), "trigger")
		if r.code != 0 || !strings.Contains(r.stderr, "note: DAG afstop in Airflow is not flow afstop as it compiles now") {
			t.Errorf("trigger of a changed flow: exit %d; want 0 and a note that the DAG is not the flow's", r.code)
		}
		if _, err := cl.Stop(t.Context(), "afstop", triggeredRun(t, r)); err != nil {
			t.Error(err)
		}
	})

	t.Run("import-error", func(t *testing.T) {
		flow := chainFlow("afrejected", "")
		p := testflows.Compile(t, flow)
		r := runAF(t, flow, p, append([]string{"deploy", "--wait-parsed"}, dags...)...)
		if r.code != ExitInvalid || !strings.Contains(r.stderr, "Airflow could not import afrejected.py") || !strings.Contains(r.stderr, "refused by the test's cluster policy") {
			t.Errorf("deploy --wait-parsed of a DAG Airflow refuses: exit %d; want %d and the import error", r.code, ExitInvalid)
		}
	})

	t.Run("usage", func(t *testing.T) {
		flow := chainFlow("afusage", "")
		p := testflows.Compile(t, flow)
		if r := runAF(t, flow, p, "deploy"); r.code != ExitUsage || !strings.Contains(r.stderr, "--dags-folder") {
			t.Errorf("deploy without a dags folder: exit %d; want %d naming --dags-folder", r.code, ExitUsage)
		}
		if r := runAF(t, flow, p, "trigger", "--param", "nosuch=1"); r.code != ExitUsage || !strings.Contains(r.stderr, "its params are size") {
			t.Errorf("trigger --param nosuch: exit %d; want %d naming the flow's params", r.code, ExitUsage)
		}
		if r := runAF(t, flow, p, "trigger", "--on-interrupt", "maybe"); r.code != ExitUsage {
			t.Errorf("trigger --on-interrupt maybe: exit %d; want %d", r.code, ExitUsage)
		}
		t.Setenv(airflow.EnvPassword, "wrong")
		if r := runAF(t, flow, p, "list"); r.code != ExitInvalid || !strings.Contains(r.stderr, "Unauthorized") {
			t.Errorf("runs list with a wrong password: exit %d; want %d, unauthorized", r.code, ExitInvalid)
		}
	})
}

// interruptedTrigger runs trigger --wait --on-interrupt onInterrupt, and
// interrupts it once step a's task runs; it returns what the command did and
// the run's id.
func interruptedTrigger(t *testing.T, cl *airflow.Client, flow *sdk.Flow, p *plan.Flow, onInterrupt string) (afResult, string) {
	t.Helper()
	before, err := cl.Runs(t.Context(), flow.Name(), 100)
	if err != nil && !airflow.NotFound(err) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan afResult, 1)
	go func() { done <- runAFContext(ctx, t, flow, p, "trigger", "--wait", "--on-interrupt", onInterrupt) }()
	var id string
	for deadline := time.Now().Add(time.Minute); id == ""; time.Sleep(200 * time.Millisecond) {
		runs, err := cl.Runs(t.Context(), flow.Name(), 100)
		for _, r := range runs {
			if !slices.ContainsFunc(before, func(b airflow.DAGRun) bool { return b.ID == r.ID }) {
				id = r.ID
			}
		}
		if id == "" && time.Now().After(deadline) {
			t.Fatalf("trigger made no run: %v, %v", runs, err)
		}
	}
	waitTask(t, cl, flow.Name(), id, "a", "running")
	cancel()
	return <-done, id
}

// seen is a writer that closes c once what was written holds want.
type seen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	c    chan struct{}
}

func newSeen(want string) *seen { return &seen{want: want, c: make(chan struct{})} }

func (s *seen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	open := !strings.Contains(s.buf.String(), s.want)
	s.buf.Write(p)
	if open && strings.Contains(s.buf.String(), s.want) {
		close(s.c)
	}
	return len(p), nil
}

// podEnv is the value of variable name in pod's first container, "" when it
// has none.
func podEnv(pod corev1.Pod, name string) string {
	for _, e := range pod.Spec.Containers[0].Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

// waitSpans waits until rcv has at least n spans (the trace is sent as the
// command ends, but the receiver may see it a moment later).
func waitSpans(t *testing.T, rcv *otlptest.Receiver, n int) []otlptest.Span {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := rcv.Spans()
		if len(spans) >= n || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTask waits until task of the run is in state, and returns the states of
// every task then.
func waitTask(t *testing.T, cl *airflow.Client, dagID, run, task, state string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for {
		tis, err := cl.TaskInstances(ctx, dagID, run)
		states := map[string]string{}
		for _, ti := range tis {
			states[ti.TaskID] = ti.StateName()
		}
		if err == nil && states[task] == state {
			return states
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s of run %s never %s: %v, %v", task, run, state, states, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// strictJSON decodes data into v, refusing a field v's type does not have.
func strictJSON(t *testing.T, data string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("decoding %T: %v:\n%s", v, err, data)
	}
}
