package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/simcluster"
)

// Variables of the Airflow home's cluster policies.
const (
	// envFailStep names, to the pod_mutation_hook, the step whose pods get the
	// label that makes kwok fail them.
	envFailStep = "MANIFOLD_SIMFAIL_STEP"
	// envExitStep names, for pods on a real node, the step whose container
	// prints a line and exits 3 instead of running its command (its image must
	// have sh).
	envExitStep = "MANIFOLD_EXIT_STEP"
	// envReadLogs set to 1 keeps the operators reading their pods' logs, as a
	// real node serves them (kwok's nodes serve none).
	envReadLogs = "MANIFOLD_READ_LOGS"
)

// airflowRunTimeout bounds one `airflow dags test`.
const airflowRunTimeout = 4 * time.Minute

// The Airflow home of this test binary: one sqlite database, migrated once, that
// every DAG run uses in turn (sqlite takes one writer at a time).
var airflowHome struct {
	once sync.Once
	dir  string
	err  error
	out  []byte
	run  sync.Mutex
}

// airflowHomeDir returns the binary's Airflow home, creating it and its database
// on first use: testdata/airflow/airflow_local_settings.py is its cluster policy.
func airflowHomeDir(t *testing.T, python string) string {
	t.Helper()
	h := &airflowHome
	h.once.Do(func() {
		if h.dir, h.err = os.MkdirTemp("", "manifold-airflow-home-"); h.err != nil {
			return
		}
		policy, err := os.ReadFile(filepath.Join("testdata", "airflow", "airflow_local_settings.py"))
		if err == nil {
			err = os.MkdirAll(filepath.Join(h.dir, "config"), 0o755)
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(h.dir, "config", "airflow_local_settings.py"), policy, 0o644)
		}
		if h.err = err; err != nil {
			return
		}
		cmd := exec.Command(python, "-m", "airflow", "db", "migrate")
		cmd.Env = airflowEnv(h.dir, h.dir)
		h.out, h.err = cmd.CombinedOutput()
	})
	if h.err != nil {
		t.Fatalf("Airflow home %s: airflow db migrate: %v\n%s", h.dir, h.err, h.out)
	}
	return h.dir
}

// removeAirflowHome deletes the binary's Airflow home, if one was made.
func removeAirflowHome() {
	if airflowHome.dir != "" {
		_ = os.RemoveAll(airflowHome.dir)
	}
}

// airflowEnv is the environment of an Airflow command using home and reading the
// DAGs of dags, with no example DAGs.
func airflowEnv(home, dags string) []string {
	return append(os.Environ(),
		"AIRFLOW_HOME="+home,
		"AIRFLOW__CORE__DAGS_FOLDER="+dags,
		"AIRFLOW__CORE__LOAD_EXAMPLES=False",
	)
}

// airflowRun is what happened when a DAG ran: the run as a jobRun (steps
// created when the first of their tasks started, done when their own task's
// every instance had succeeded, on Airflow's clock), and each task's state.
type airflowRun struct {
	*jobRun
	state  string
	states map[string][]string // task id → state of each map index
	// output is what `airflow dags test` printed; log its last lines.
	output, log string
}

// runStates is what testdata/airflow/runstates.py prints.
type runStates struct {
	Error string     `json:"error"`
	RunID string     `json:"run_id"`
	State string     `json:"state"`
	Start *time.Time `json:"start"`
	Tasks []struct {
		TaskID   string     `json:"task_id"`
		MapIndex int        `json:"map_index"`
		State    *string    `json:"state"`
		Start    *time.Time `json:"start"`
		End      *time.Time `json:"end"`
	} `json:"tasks"`
}

// runAirflow compiles e for the airflow target and runs its DAG with `airflow
// dags test` against the cluster, in namespace ns (the kubernetes_default
// connection's). edit, if not nil, rewrites the DAG file first (for the
// mutation tests). policy are variables for the Airflow home's cluster policies
// (testdata/airflow/airflow_local_settings.py): envFailStep, envExitStep,
// envReadLogs.
func runAirflow(t *testing.T, c *simcluster.Cluster, ns string, e *example, edit func([]byte) []byte, policy ...string) *airflowRun {
	t.Helper()
	python := airflowtest.Python(t)
	home := airflowHomeDir(t, python)
	dags := t.TempDir()
	if out, err := e.command(t, "compile", "--target", "airflow", "-o", dags).CombinedOutput(); err != nil {
		t.Fatalf("%s compile --target airflow: %v\n%s", e.Name, err, out)
	}
	if edit != nil {
		file := filepath.Join(dags, e.Name+".py")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, edit(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The volumes the steps mount, and the ResourceClaimTemplates they claim
	// from (<flow>.claims.yaml), are the same on every target.
	jobs := e.compileTarget(t, "job")
	preparePVCs(t, c, ns, jobs)
	prepareClaims(t, c, ns, jobs)
	conn, err := json.Marshal(map[string]any{
		"conn_type": "kubernetes",
		"extra":     map[string]any{"in_cluster": false, "kube_config_path": c.Kubeconfig, "namespace": ns},
	})
	if err != nil {
		t.Fatal(err)
	}
	airflowHome.run.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), airflowRunTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "airflow", "dags", "test", e.Name)
	cmd.Env = append(append(airflowEnv(home, dags), "AIRFLOW_CONN_KUBERNETES_DEFAULT="+string(conn)), policy...)
	began := time.Now()
	out, runErr := cmd.CombinedOutput()
	states := exec.Command(python, filepath.Join("testdata", "airflow", "runstates.py"), filepath.Join(home, "airflow.db"), e.Name)
	data, err := states.Output()
	airflowHome.run.Unlock()
	logTail := tail(string(out), 60)
	if err != nil {
		t.Fatalf("runstates.py: %v\nairflow dags test (%v):\n%s", err, runErr, logTail)
	}
	var rs runStates
	if err := json.Unmarshal(data, &rs); err != nil || rs.Error != "" {
		t.Fatalf("runstates.py: %v%s\nairflow dags test (%v):\n%s", err, rs.Error, runErr, logTail)
	}
	if rs.Start == nil || rs.Start.Before(began) {
		t.Fatalf("airflow dags test %s made no new run (the latest started at %v): %v\n%s", e.Name, rs.Start, runErr, logTail)
	}
	if runErr != nil && rs.State == "success" {
		t.Errorf("airflow dags test %s: %v, although the run succeeded:\n%s", e.Name, runErr, logTail)
	}
	r := &airflowRun{
		jobRun: &jobRun{
			created: map[string]time.Time{}, done: map[string]time.Time{},
			failed: map[string]string{}, pending: map[string]string{}, restarts: map[string]int{},
			pods: map[string][]corev1.Pod{}, nodeType: nodeTypes(t, c),
		},
		state: rs.State, states: map[string][]string{}, output: string(out), log: logTail,
	}
	// A step's tasks: its own, and for a multi-node step the setup task that
	// creates its Service and the teardown task that deletes it.
	stepOf := func(task string) string {
		for _, suffix := range []string{airflow.ServiceDeleteTaskSuffix, airflow.ServiceTaskSuffix} {
			if s, ok := strings.CutSuffix(task, suffix); ok && e.step(s) != nil {
				return s
			}
		}
		return task
	}
	allSucceeded := map[string]bool{}
	for _, ti := range rs.Tasks {
		state := "none"
		if ti.State != nil {
			state = *ti.State
		}
		r.states[ti.TaskID] = append(r.states[ti.TaskID], state)
		s := stepOf(ti.TaskID)
		if e.step(s) == nil {
			t.Errorf("task %s belongs to no step of the plan", ti.TaskID)
			continue
		}
		if ti.Start != nil {
			if first, ok := r.created[s]; !ok || ti.Start.Before(first) {
				r.created[s] = *ti.Start
			}
		}
		if ti.TaskID != s {
			continue
		}
		ok, seen := allSucceeded[s]
		allSucceeded[s] = (ok || !seen) && state == "success" && ti.End != nil
		if ti.End != nil && ti.End.After(r.done[s]) {
			r.done[s] = *ti.End
		}
		if state == "failed" || state == "upstream_failed" {
			r.failed[s] = "task " + ti.TaskID + " " + state
		}
	}
	for s, ok := range allSucceeded {
		if !ok {
			delete(r.done, s)
		}
	}
	for _, ps := range e.Steps {
		if _, ok := r.created[ps.Name]; ok {
			r.order = append(r.order, ps.Name)
			r.pods[ps.Name] = stepPods(context.Background(), t, c, ns, ps.Name)
		}
	}
	slices.SortStableFunc(r.order, func(a, b string) int { return r.created[a].Compare(r.created[b]) })
	return r
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestAirflowFailedStepStopsDependents makes hello's middle step fail under
// Airflow (the Airflow home's pod_mutation_hook labels its pod to fail): the
// DAG run fails, the step's task failed, and echo, which waits for it, never
// runs.
func TestAirflowFailedStepStopsDependents(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "hello")
	ns := c.Namespace(t)
	r := runAirflow(t, c, ns, e, nil, envFailStep+"=shout")
	if r.state != "failed" {
		t.Errorf("DAG run ended %q, want failed\n%s", r.state, r.log)
	}
	if _, ok := r.done["greet"]; !ok {
		t.Errorf("greet did not complete: %v (tasks %v)", checkComplete(e, r.jobRun), r.states)
	}
	if got := r.states["shout"]; len(got) != 1 || got[0] != "failed" {
		t.Errorf("shout: task states %v, want [failed]", got)
	}
	if got := r.states["echo"]; len(got) != 1 || got[0] != "upstream_failed" {
		t.Errorf("echo: task states %v, want [upstream_failed]", got)
	}
	if pods := stepPods(context.Background(), t, c, ns, "echo"); len(pods) > 0 {
		t.Errorf("echo ran %d pods although shout failed", len(pods))
	}
	if pods := stepPods(context.Background(), t, c, ns, "shout"); len(pods) == 0 {
		t.Error("shout ran no pod")
	} else if p := pods[0]; p.Status.Phase != corev1.PodFailed || p.Labels[simcluster.LabelFail] != "true" {
		t.Errorf("shout's pod %s: phase %s, labels %v; want Failed, labelled to fail", p.Name, p.Status.Phase, p.Labels)
	}
}

// TestMutationAirflowBrokenOrder: with hello's last dependency reversed in the
// DAG (echo before shout), echo starts before shout has ended, and checkOrder,
// reading the run's task instances, catches it.
func TestMutationAirflowBrokenOrder(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "hello")
	const edge, reversed = `tasks["shout"] >> tasks["echo"]`, `tasks["echo"] >> tasks["shout"]`
	r := runAirflow(t, c, c.Namespace(t), e, func(dag []byte) []byte {
		if !bytes.Contains(dag, []byte(edge)) {
			t.Fatalf("hello's DAG has no line %s", edge)
		}
		return bytes.Replace(dag, []byte(edge), []byte(reversed), 1)
	})
	if r.state != "success" {
		t.Fatalf("the mutated DAG should still run: %q, tasks %v\n%s", r.state, r.states, r.log)
	}
	if problems := checkOrder(e, r.jobRun); !containsAll(problems, "step echo started before step shout, which it waits for, completed") {
		t.Errorf("checkOrder did not catch the broken order: %q", problems)
	}
}
