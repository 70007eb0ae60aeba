package airflow_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/sdk"
)

// TestMultiNodeStepIsAJobBetweenItsServiceTasks: a multi-node step is a setup task
// creating its Service, its Job task, and a teardown deleting the Service; the
// steps after it wait for the Job task alone.
func TestMultiNodeStepIsAJobBetweenItsServiceTasks(t *testing.T) {
	py, kpo := emitFiles(t, multiNodeFlow())
	type shape struct {
		ID, Operator string
		Upstream     []string
		Setup        bool
		TeardownOf   []string
	}
	var got []shape
	for _, task := range kpo.Tasks {
		op := task.Operator[strings.LastIndex(task.Operator, ".")+1:]
		got = append(got, shape{task.TaskID, op, task.Upstream, task.Setup, task.TeardownOf})
	}
	want := []shape{
		{"prepare", "KubernetesPodOperator", []string{}, false, nil},
		{"train_service", "KubernetesCreateResourceOperator", []string{"prepare"}, true, nil},
		{"train", "KubernetesJobOperator", []string{"train_service"}, false, nil},
		{"train_service_delete", "KubernetesDeleteResourceOperator", []string{"train"}, false, []string{"train_service"}},
		{"sweep_service", "KubernetesCreateResourceOperator", []string{"prepare"}, true, nil},
		{"sweep", "KubernetesJobOperator", []string{"sweep_service"}, false, nil},
		{"sweep_service_delete", "KubernetesDeleteResourceOperator", []string{"sweep"}, false, []string{"sweep_service"}},
		{"evaluate", "KubernetesPodOperator", []string{"train", "sweep"}, false, nil},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("tasks (-want +got):\n%s", diff)
	}
	train := kpo.Tasks[2].Arguments
	for name, want := range map[string]any{
		"completion_mode": "Indexed", "completions": 2.0, "parallelism": 2.0, "backoff_limit": 0.0,
		"wait_until_job_complete": true, "random_name_suffix": false, "retries": 2.0,
	} {
		if train[name] != want {
			t.Errorf("train %s = %v, want %v", name, train[name], want)
		}
	}
	for _, line := range []string{
		`tasks["train_service_delete"].as_teardown(setups=tasks["train_service"])`,
		`tasks["train"] = KubernetesJobOperator(`, `tasks["sweep"] = KubernetesJobOperator.partial(`,
		"from airflow.providers.cncf.kubernetes.operators.job import KubernetesJobOperator\n",
	} {
		if !strings.Contains(py, line) {
			t.Errorf("the DAG lacks %s", line)
		}
	}
	if strings.Contains(py, `tasks["train_service"] >> tasks["train_service_delete"]`) {
		t.Errorf("the DAG sets the teardown's setup upstream twice")
	}
}

// TestMultiNodeNamesFit: with the run digest, the try (up to 999) and the map
// index at their longest, every Job's last host name and every Service's name is a
// DNS label, however long the names, however many the nodes and items.
func TestMultiNodeNamesFit(t *testing.T) {
	long := strings.Repeat("x", compile.MaxNameLength)
	for _, nodes := range []int{2, 10, 11, 1000, compile.MaxNodes} {
		for _, items := range []int{0, 1, 10, 11, 1000} {
			opts := []sdk.StepOption{sdk.Command("true"), sdk.Nodes(nodes)}
			if items > 0 {
				opts = append(opts, sdk.Foreach(make([]string, items)...))
			}
			_, kpo := emitFiles(t, sdk.NewFlow(long, sdk.Image("busybox")).Step(long, opts...))
			index := "0"
			if items > 0 {
				index = strconv.Itoa(items - 1)
			}
			longest := strings.NewReplacer(airflow.RunToken, strings.Repeat("f", 12), "{{ti.try_number}}", "999", "{{ti.map_index}}", index)
			name, _ := kpo.Tasks[1].Arguments["name"].(string)
			host := fmt.Sprintf("%s%s-%d", airflow.JobNamePrefix, longest.Replace(name), nodes-1)
			for _, msg := range validation.IsDNS1123Label(host) {
				t.Errorf("nodes %d, items %d: host name %q: %s", nodes, items, host, msg)
			}
			labels, _ := kpo.Tasks[1].Arguments["labels"].(map[string]any)
			service, _ := labels[airflow.LabelService].(string)
			if service == "" {
				t.Fatalf("no %s label in %v", airflow.LabelService, labels)
			}
			for _, msg := range validation.IsDNS1035Label(longest.Replace(service)) {
				t.Errorf("nodes %d, items %d: Service name %q: %s", nodes, items, longest.Replace(service), msg)
			}
		}
	}
}
