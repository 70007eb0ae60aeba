package airflow_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// hostileItems are items a step found at run time that Jinja, the kubelet's
// $(NAME) expansion or Python quoting would change if any of them took them
// as code: each must reach its pod as it is.
var hostileItems = []string{
	"{{ 7*7 }}",
	"{% raw %}{{ params }}{% endraw %}",
	`"double" 'single' \back`,
	"two\nlines\n",
	"$(MANIFOLD_PARAM_N) $(MANIFOLD_INDEX) $$ $X",
	"naïve — 日本語 🎉",
	`{"k":"{{ v }}"}`,
	"",
}

// dynamicFlow is a dynamic flow: list publishes the items, each (a Command
// step) fans out over them, pick publishes a choice, and taken and other
// branch on it, with when's value (JSON text) as taken's.
func dynamicFlow(name string, when any) *sdk.Flow {
	run := sdk.Run(func(*sdk.Context) error { return nil })
	return sdk.NewFlow(name, sdk.Image("example.com/flow:v1"), sdk.Param("n", "3")).
		Step("list", run).
		Step("each", sdk.Command("sh", "-c", `printf %s "$MANIFOLD_ITEM"`), sdk.ForeachOf("list", "items"), sdk.Retry(2)).
		Step("pick", run, sdk.After("each")).
		Step("taken", run, sdk.When("pick", "choice", when)).
		Step("other", run, sdk.When("pick", "choice", "other")).
		Step("report", run, sdk.After("taken", "other"))
}

// published is the XCom of a step that published values: the object its
// values file holds.
func published(values map[string]any) map[string]any {
	out := map[string]any{}
	for name, v := range values {
		data, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		pv := map[string]any{"json": string(data) + "\n", "canonical": string(data), "items": nil}
		if list, ok := v.([]string); ok {
			pv["items"] = list
		}
		out[name] = pv
	}
	return out
}

// TestRealAirflowDynamic loads dynamic flows' DAGs in Airflow and runs what
// a run would, the producing tasks' XComs given: the items task renders the
// run's templates and returns each item; each mapped instance of the
// fan-out, expanded by Airflow over that XCom and rendered as a worker
// renders it, gets a pod that is the step's pod with its item, index and
// count, every hostile item byte for byte ("$" doubled for the kubelet,
// which gives back one); a branch whose value (hostile too) matches runs,
// the other skips itself; and every task waits with the trigger rule that
// makes a join wait only for the branch taken. A fan-out over no item has
// no instance.
func TestRealAirflowDynamic(t *testing.T) {
	dir := t.TempDir()
	choice := "{{ 7*7 }} $(X)"
	full := compileFlow(t, dynamicFlow("dyn", choice))
	empty := compileFlow(t, dynamicFlow("dyn-empty", "x"))
	writeAirflow(t, full, dir)
	writeAirflow(t, empty, dir)
	r := airflowtest.CheckRun(t, dir, map[string]map[string]any{
		"dyn": {
			"list": published(map[string]any{"items": hostileItems}),
			"pick": published(map[string]any{"choice": choice}),
		},
		"dyn-empty": {
			"list": published(map[string]any{"items": []string{}}),
			"pick": published(map[string]any{"choice": "x"}),
		},
	})
	if len(r.SyntaxErrors) > 0 || len(r.ImportErrors) > 0 {
		t.Fatalf("Airflow cannot load the DAGs:\nsyntax errors: %v\nimport errors: %v", r.SyntaxErrors, r.ImportErrors)
	}
	d, ok := r.DAGs["dyn"]
	if !ok {
		t.Fatalf("no DAG dyn: %v", r.DAGs)
	}
	if d.SerializationError != nil {
		t.Fatalf("the DAG does not serialize: %s", *d.SerializationError)
	}
	checkDynamicShape(t, d)
	checkItems(t, full, d)
	if g := d.Tasks["taken_when"].Gate; g == nil || g.Error != "" || g.Skipped != "" {
		t.Errorf("taken_when, whose value matches: %+v; want it to return", g)
	}
	if g := d.Tasks["other_when"].Gate; g == nil || !strings.Contains(g.Skipped, `not taken: pick's choice is "{{ 7*7 }} $(X)", and other runs when it is "other"`) {
		t.Errorf("other_when, whose value does not match: %+v; want it skipped, saying why", g)
	}
	e := r.DAGs["dyn-empty"]
	if g := e.Tasks["each_items"].Gate; g == nil || string(g.Result) != "[]" {
		t.Errorf("dyn-empty each_items: %+v; want no item", g)
	}
	if n := len(e.Tasks["each"].Instances); n != 0 {
		t.Errorf("dyn-empty each: %d instances, want none", n)
	}
}

// checkDynamicShape checks each task's operator, upstream tasks and trigger
// rule.
func checkDynamicShape(t *testing.T, d airflowtest.DAG) {
	t.Helper()
	const rule = airflow.TriggerRule
	want := map[string]struct {
		operator string
		upstream []string
		rule     string
	}{
		"list":       {"KubernetesPodOperator", nil, "all_success"},
		"each_items": {"PythonOperator", []string{"list"}, rule},
		"each":       {"KubernetesPodOperator", []string{"each_items"}, rule},
		"pick":       {"KubernetesPodOperator", []string{"each", "each_items"}, rule},
		"taken_when": {"PythonOperator", []string{"pick"}, rule},
		"taken":      {"KubernetesPodOperator", []string{"taken_when"}, rule},
		"other_when": {"PythonOperator", []string{"pick"}, rule},
		"other":      {"KubernetesPodOperator", []string{"other_when"}, rule},
		"report":     {"KubernetesPodOperator", []string{"other", "taken"}, rule},
	}
	if len(d.Tasks) != len(want) {
		t.Errorf("%d tasks, want %d: %v", len(d.Tasks), len(want), d.Tasks)
	}
	for id, w := range want {
		got, ok := d.Tasks[id]
		if !ok {
			t.Errorf("no task %s", id)
			continue
		}
		if got.Operator != w.operator || !slices.Equal(got.Upstream, w.upstream) || got.TriggerRule != w.rule {
			t.Errorf("task %s: %s after %v, trigger rule %s; want %s after %v, %s", id, got.Operator, got.Upstream, got.TriggerRule, w.operator, w.upstream, w.rule)
		}
	}
	if !d.Tasks["each"].Mapped || d.Tasks["each"].MappedOver == "" {
		t.Errorf("each is not mapped over an XCom: %+v", d.Tasks["each"])
	}
}

// checkItems checks the items task's XCom and each mapped instance's pod.
func checkItems(t *testing.T, p *plan.Flow, d airflowtest.DAG) {
	t.Helper()
	g := d.Tasks["each_items"].Gate
	if g == nil || g.Error != "" {
		t.Fatalf("each_items: %+v", g)
	}
	var items []struct {
		Item      string            `json:"item"`
		Index     int               `json:"index"`
		Count     int               `json:"count"`
		Templates map[string]string `json:"templates"`
	}
	if err := json.Unmarshal(g.Result, &items); err != nil {
		t.Fatal(err)
	}
	if len(items) != len(hostileItems) {
		t.Fatalf("each_items returned %d items, want %d", len(items), len(hostileItems))
	}
	for i, it := range items {
		if it.Item != hostileItems[i] || it.Index != i || it.Count != len(hostileItems) {
			t.Errorf("item %d: %q, index %d of %d; want %q, %d of %d", i, it.Item, it.Index, it.Count, hostileItems[i], i, len(hostileItems))
		}
		if want := map[string]string{"MANIFOLD_PARAM_N": "3", plan.EnvTraceParent: ""}; !cmp.Equal(it.Templates, want) {
			t.Errorf("item %d: templates rendered as %v, want %v", i, it.Templates, want)
		}
	}
	s := p.Step("each")
	instances := d.Tasks["each"].Instances
	if len(instances) != len(hostileItems) {
		t.Fatalf("each: %d instances, want %d", len(instances), len(hostileItems))
	}
	for i, in := range instances {
		if in.Error != "" {
			t.Errorf("each[%d]: %s", i, in.Error)
			continue
		}
		item := &emit.Item{Value: strings.ReplaceAll(hostileItems[i], "$", "$$"), Index: strconv.Itoa(i), Count: strconv.Itoa(len(hostileItems))}
		want := emit.Pod(p, s, emit.PodOptions{Item: item})
		want.Labels = emit.Queued(want.Labels, s)
		comparePods(t, "each["+strconv.Itoa(i)+"]", want, in.Pod, airflow.PodName(p, s), s.Namespace)
		if in.Retries != 2 {
			t.Errorf("each[%d]: %d retries, want 2 (each item retries on its own)", i, in.Retries)
		}
	}
}
