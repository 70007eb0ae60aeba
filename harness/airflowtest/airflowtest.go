// Package airflowtest runs real Airflow from tests, in the Python environment
// that tools/airflow/venv.sh builds (apache-airflow and the cncf.kubernetes
// provider at the versions of tools/airflow/constraints.txt): Check runs
// tools/airflow/dagcheck.py, which loads a directory of generated DAGs and
// reports what Airflow made of them, and StartServer starts a whole Airflow
// (API server, scheduler and DAG processor) on loopback for a test.
package airflowtest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/pyenv"
)

// Env names the Python of an Airflow environment already built (make test sets
// it); without it, the first test that needs Airflow builds or finds the cached
// environment itself.
const Env = "MANIFOLD_AIRFLOW_PYTHON"

var env = pyenv.Env{Var: Env, Tool: "airflow", What: "Airflow test environment"}

// Python returns the interpreter of the Airflow test environment. It never skips:
// without Airflow, the test fails and says how to get it.
func Python(t testing.TB) string {
	t.Helper()
	return env.Python(t)
}

// Report is what dagcheck.py found in a directory.
type Report struct {
	// SyntaxErrors and Shapes are keyed by file name; a shape is the file's
	// syntax tree with every constant blanked.
	SyntaxErrors map[string]string `json:"syntax_errors"`
	Shapes       map[string]string `json:"shapes"`
	ImportErrors map[string]string `json:"import_errors"`
	DAGs         map[string]DAG    `json:"dags"`
	// KPOJSON holds, per .kpo.json file, what each task's operator built from
	// its arguments, by task: a list of pods, of Jobs, or of one rendered Service
	// task ({yaml_conf, namespace}); or {"error": ...}.
	KPOJSON map[string]map[string]json.RawMessage `json:"kpo_json"`
}

// DAG is one DAG of the DagBag.
type DAG struct {
	Schedule           *string           `json:"schedule"`
	Catchup            bool              `json:"catchup"`
	StartDate          string            `json:"start_date"`
	Params             map[string]string `json:"params"`
	File               string            `json:"fileloc"`
	SerializationError *string           `json:"serialization_error"`
	Tasks              map[string]Task   `json:"tasks"`
}

// Task is one task of a DAG.
type Task struct {
	Operator   string     `json:"operator"`
	Mapped     bool       `json:"mapped"`
	Setup      bool       `json:"setup"`
	Teardown   bool       `json:"teardown"`
	Upstream   []string   `json:"upstream"`
	Downstream []string   `json:"downstream"`
	Instances  []Instance `json:"instances"`
	// ScheduledMapCount is, for a mapped task, how many instances the scheduler
	// makes of it, reading the DAG as the DAG processor stored it.
	ScheduledMapCount int `json:"scheduled_map_count"`
	// TriggerRule is the task's trigger rule.
	TriggerRule string `json:"trigger_rule"`
	// PythonCallable names, for a dynamic flow's gate (a PythonOperator),
	// its function; Gate is what it did in the simulated run (DAGCHECK_XCOM).
	PythonCallable string `json:"python_callable"`
	Gate           *Gate  `json:"gate"`
	// MappedOver describes, for a task mapped over an XCom, what it is mapped
	// over; its Instances are those of the simulated run, if any.
	MappedOver string `json:"mapped_over"`
}

// Gate is what a dynamic flow's gate did in a simulated run: returned
// Result (its XCom), skipped itself (Skipped, the reason), or failed (Error).
type Gate struct {
	Result  json.RawMessage `json:"result"`
	Skipped string          `json:"skipped"`
	Error   string          `json:"error"`
}

// Instance is a task (one map index of a mapped task) as a worker runs it: its
// templated fields rendered with the DAG's default params, and what it creates:
// the pod the operator's build_pod_request_obj builds; for KubernetesJobOperator
// the Job its build_job_request_obj builds in the first try and in the second; for
// the resource operators the rendered YAML and the namespace it goes to.
type Instance struct {
	Error                string       `json:"error"`
	Pod                  *corev1.Pod  `json:"pod"`
	Job                  *batchv1.Job `json:"job"`
	RetryJob             *batchv1.Job `json:"retry_job"`
	WaitUntilJobComplete bool         `json:"wait_until_job_complete"`
	YAMLConf             string       `json:"yaml_conf"`
	Namespace            string       `json:"namespace"`
	// ConnectionNamespace is, for the Job and Service tasks, the namespace of
	// the Job or Services when the Kubernetes connection names one.
	ConnectionNamespace     string   `json:"connection_namespace"`
	Retries                 int      `json:"retries"`
	RetryDelay              *float64 `json:"retry_delay"`
	RetryExponentialBackoff float64  `json:"retry_exponential_backoff"`
	MaxRetryDelay           *float64 `json:"max_retry_delay"`
	ExecutionTimeout        *float64 `json:"execution_timeout"`
	OnFinishAction          string   `json:"on_finish_action"`
}

// Check runs dagcheck.py on dir.
func Check(t testing.TB, dir string) *Report {
	t.Helper()
	return CheckRun(t, dir, nil)
}

// CheckRun runs dagcheck.py on dir as Check does, simulating a run whose
// tasks pushed xcoms (by DAG id, then task id; nil for none): the dynamic
// flows' gates run, and their mapped tasks expand, over them.
func CheckRun(t testing.TB, dir string, xcoms map[string]map[string]any) *Report {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(Python(t), filepath.Join(exampletest.Root(), "tools", "airflow", "dagcheck.py"), dir, out)
	if xcoms != nil {
		data, err := json.Marshal(xcoms)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "xcoms.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(os.Environ(), "DAGCHECK_XCOM="+file)
	}
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dagcheck.py %s: %v\n%s", dir, err, log)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("dagcheck.py report: %v", err)
	}
	return &r
}
