package airflow_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func emitFiles(t *testing.T, f *sdk.Flow) (py string, kpo airflow.KPOFile) {
	t.Helper()
	files, errs := emit.Files(airflow.Target{}, compileFlow(t, f))
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	var names []string
	for _, file := range files {
		names = append(names, file.Name)
	}
	// A flow with DRA steps also gets its ResourceClaimTemplates' file.
	if len(files) < 2 || files[0].Name != f.Name()+".py" || files[1].Name != f.Name()+".kpo.json" ||
		len(files) > 3 || len(files) == 3 && files[2].Name != f.Name()+emit.ClaimsFileSuffix {
		t.Fatalf("files %v, want %s.py and %s.kpo.json, and %[2]s%s for DRA", names, f.Name(), f.Name(), emit.ClaimsFileSuffix)
	}
	if err := json.Unmarshal(files[1].Data, &kpo); err != nil {
		t.Fatal(err)
	}
	return string(files[0].Data), kpo
}

func TestEmitIsDeterministic(t *testing.T) {
	a, errs := emit.Files(airflow.Target{}, compileFlow(t, everyOption()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for range 5 {
		b, _ := emit.Files(airflow.Target{}, compileFlow(t, everyOption()))
		if !cmp.Equal(a, b) {
			t.Fatalf("two emits differ:\n%s", cmp.Diff(string(a[0].Data), string(b[0].Data)))
		}
	}
}

// TestJSONHoldsTheDAGsArguments: the JSON file carries what the DAG file does,
// from the same DAG value.
func TestJSONHoldsTheDAGsArguments(t *testing.T) {
	for _, f := range []func() *sdk.Flow{everyOption, multiNodeFlow} {
		p := compileFlow(t, f())
		d, errs := airflow.Build(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		_, kpo := emitFiles(t, f())
		if kpo.DAGID != p.Name || kpo.Schedule != nil {
			t.Errorf("dag_id %q, schedule %v", kpo.DAGID, kpo.Schedule)
		}
		params := map[string]string{}
		for _, prm := range p.Params {
			params[prm.Name] = prm.Value
		}
		if diff := cmp.Diff(params, kpo.Params); diff != "" {
			t.Errorf("params (-want +got):\n%s", diff)
		}
		if len(kpo.Tasks) != len(d.Tasks) {
			t.Fatalf("%d tasks in the JSON, %d in the DAG", len(kpo.Tasks), len(d.Tasks))
		}
		for i, task := range d.Tasks {
			got := kpo.Tasks[i]
			if want := airflow.Operators[task.Operator] + "." + task.Operator; got.Operator != want {
				t.Errorf("task %s operator %q, want %q", got.TaskID, got.Operator, want)
			}
			if got.TaskID != task.ID || !cmp.Equal(got.Upstream, append([]string{}, task.Upstream...)) {
				t.Errorf("task %d: %s after %v, want %s after %v", i, got.TaskID, got.Upstream, task.ID, task.Upstream)
			}
			if got.Setup != task.Setup || !cmp.Equal(got.TeardownOf, task.Setups) {
				t.Errorf("task %s: setup %v, teardown of %v; want %v, %v", task.ID, got.Setup, got.TeardownOf, task.Setup, task.Setups)
			}
			for _, a := range task.Args {
				want := a.Value
				if d, ok := want.(time.Duration); ok {
					want = d.Seconds()
				}
				if diff := cmp.Diff(jsonValue(t, want), jsonValue(t, got.Arguments[a.Name])); diff != "" {
					t.Errorf("task %s argument %s (-dag +json):\n%s", task.ID, a.Name, diff)
				}
			}
			if len(got.Arguments) != len(task.Args) {
				t.Errorf("task %s: %d arguments in the JSON, %d in the DAG", task.ID, len(got.Arguments), len(task.Args))
			}
			if diff := cmp.Diff(task.Items, got.Expand["env_vars"]); diff != "" {
				t.Errorf("task %s expand (-dag +json):\n%s", task.ID, diff)
			}
		}
	}
}

// jsonValue is v as encoding/json reads it back: maps, slices, strings, numbers.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParamsAreTemplatesAndTextIsLiteral: the params' variables are the one
// template in a task; text that Airflow would render as a template, or whose line
// breaks Jinja would change, is wrapped in literal() — and only where the
// operator renders it.
func TestParamsAreTemplatesAndTextIsLiteral(t *testing.T) {
	py, kpo := emitFiles(t, sdk.NewFlow("lit", sdk.Image("busybox"), sdk.Param("epochs", "{{ 3 }}")).
		Step("a", sdk.Command("echo", "{{ ds }}", "plain"), sdk.Env("NOTE", "{% raw %}"), sdk.Env("LINES", "a\nb"),
			sdk.Annotation("example.com/note", "{{ x }}"), sdk.Volume("data", "/data/{{ x }}")))
	for _, want := range []string{
		`value="{{ params['epochs'] }}"`, // rendered: a param's template
		`"echo",`, `literal("{{ ds }}")`, `"plain",`,
		`value=literal("{% raw %}")`, `value=literal("a\nb")`,
		`"example.com/note": literal("{{ x }}")`,
		`mount_path="/data/{{ x }}"`, // the operator does not render mount paths
		`Param("{{ 3 }}", type="string")`,
		"from airflow.sdk import DAG, Param, literal\n",
	} {
		if !strings.Contains(py, want) {
			t.Errorf("the DAG lacks %s:\n%s", want, py)
		}
	}
	env := kpo.Tasks[0].Arguments["env_vars"]
	data, _ := json.Marshal(env)
	var vars []corev1.EnvVar
	if err := json.Unmarshal(data, &vars); err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: "MANIFOLD_PARAM_EPOCHS", Value: "{{ params['epochs'] }}"},
		{Name: plan.EnvTraceParent, Value: "{{ (dag_run.conf or {}).get('_manifold_traceparent', '') }}"},
		{Name: "NOTE", Value: "{% raw %}"}, {Name: "LINES", Value: "a\nb"}}
	if diff := cmp.Diff(want, vars); diff != "" {
		t.Errorf("JSON env_vars (-want +got):\n%s", diff)
	}
	py, _ = emitFiles(t, sdk.NewFlow("plain", sdk.Image("busybox")).Step("a", sdk.Command("true")))
	if strings.Contains(py, "literal") || strings.Contains(py, "Param") {
		t.Errorf("a flow without params or template text imports what it does not use:\n%s", py)
	}
}

func TestParamRef(t *testing.T) {
	for name, want := range map[string]string{
		"epochs":        "{{ params['epochs'] }}",
		"learning-rate": "{{ params['learning-rate'] }}",
		"items":         "{{ params['items'] }}", // params.items would be the mapping's method
	} {
		if got := airflow.ParamRef(plan.Param{Name: name}); got != want {
			t.Errorf("ParamRef(%s) = %s, want %s", name, got, want)
		}
	}
}

func TestForeachIsOneMappedTask(t *testing.T) {
	py, kpo := emitFiles(t, sdk.NewFlow("fan", sdk.Image("busybox")).
		Step("split", sdk.Command("true")).
		Step("work", sdk.Command("true"), sdk.After("split"), sdk.Foreach("a", "b", "c")).
		Step("join", sdk.Command("true"), sdk.After("work")))
	for _, want := range []string{
		`tasks["work"] = KubernetesPodOperator.partial(`, ").expand(\n        env_vars=[",
		`tasks["split"] >> tasks["work"]`, `tasks["work"] >> tasks["join"]`,
	} {
		if !strings.Contains(py, want) {
			t.Errorf("the DAG lacks %q:\n%s", want, py)
		}
	}
	work := kpo.Tasks[1]
	if _, ok := work.Arguments["env_vars"]; ok {
		t.Errorf("the mapped task's partial arguments hold env_vars")
	}
	for i, item := range []string{"a", "b", "c"} {
		want := []corev1.EnvVar{{Name: plan.EnvTraceParent, Value: airflow.TraceParent}, {Name: plan.EnvItem, Value: item}, {Name: plan.EnvIndex, Value: fmt.Sprint(i)}}
		if diff := cmp.Diff(want, work.Expand["env_vars"][i]); diff != "" {
			t.Errorf("item %d env (-want +got):\n%s", i, diff)
		}
	}
}
