package airflow

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// dynamicFlow is examples/dynamic's shape.
func dynamicFlow() *sdk.Flow {
	run := sdk.Run(func(*sdk.Context) error { return nil })
	return sdk.NewFlow("dynamic", sdk.Image("registry.example.com/d:v1")).
		Step("list", run).
		Step("process", run, sdk.ForeachOf("list", "shards"), sdk.Retry(1)).
		Step("pick", run, sdk.After("process")).
		Step("large", run, sdk.When("pick", "size", "large")).
		Step("small", run, sdk.When("pick", "size", "small")).
		Step("report", run, sdk.After("large", "small"))
}

// valuesXCom is the XCom of a step that published values (name → JSON).
func valuesXCom(values map[string]string) string {
	out := map[string]any{}
	for name, v := range values {
		out[name] = map[string]string{"json": v + "\n", "canonical": v}
	}
	data, _ := json.Marshal(map[string]any{"value": out})
	return string(data)
}

// fakeDynamicRun serves an ended run of dynamicFlow: its task instances,
// and the XComs of list (shards) and pick (size).
func fakeDynamicRun(t *testing.T, shards []string, size string, tis []TaskInstance) *httptest.Server {
	t.Helper()
	list, _ := json.Marshal(shards)
	xcoms := map[string]string{
		"list": valuesXCom(map[string]string{"shards": string(list)}),
		"pick": valuesXCom(map[string]string{"size": `"` + size + `"`, "total": "60"}),
	}
	const run = "/api/v2/dags/dynamic/dagRuns/r1"
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == run:
			fmt.Fprint(w, `{"dag_run_id": "r1", "dag_id": "dynamic", "state": "success"}`)
		case p == run+"/taskInstances":
			data, _ := json.Marshal(map[string]any{"task_instances": tis, "total_entries": len(tis)})
			_, _ = w.Write(data)
		case strings.HasSuffix(p, "/xcomEntries/"+XComReturnKey):
			task := strings.TrimPrefix(strings.TrimSuffix(p, "/xcomEntries/"+XComReturnKey), run+"/taskInstances/")
			if x, ok := xcoms[task]; ok && r.URL.Query().Get("map_index") == "-1" {
				fmt.Fprint(w, x)
				return
			}
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
}

// ti is a task instance of try 1 in state.
func ti(task string, index int, state string) TaskInstance {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return TaskInstance{TaskID: task, MapIndex: index, State: &state, TryNumber: 1, StartDate: &at, EndDate: &at}
}

// TestFollowDynamic: following a run of a dynamic flow records one task for
// each item of the fan-out (each mapped task instance), its item read from
// the producing task's XCom as the dag core reads it; the branch not taken
// as skipped, reason NotTaken, in the dag core's words; and, for a fan-out
// over no item (its mapped task skipped), a step that succeeded with no
// item, the join after it run.
func TestFollowDynamic(t *testing.T) {
	p := testflows.Compile(t, dynamicFlow())
	for _, tt := range []struct {
		name   string
		shards []string
		size   string
		tis    []TaskInstance
	}{
		{"three", []string{"a", "b", "c"}, "large", []TaskInstance{
			ti("list", -1, "success"), ti("process_items", -1, "success"),
			ti("process", 0, "success"), ti("process", 1, "success"), ti("process", 2, "success"),
			ti("pick", -1, "success"), ti("large_when", -1, "success"), ti("large", -1, "success"),
			ti("small_when", -1, "skipped"), ti("small", -1, "skipped"), ti("report", -1, "success"),
		}},
		{"none", []string{}, "small", []TaskInstance{
			ti("list", -1, "success"), ti("process_items", -1, "success"), ti("process", -1, "skipped"),
			ti("pick", -1, "success"), ti("large_when", -1, "skipped"), ti("large", -1, "skipped"),
			ti("small_when", -1, "success"), ti("small", -1, "success"), ti("report", -1, "success"),
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakeDynamicRun(t, tt.shards, tt.size, tt.tis)
			defer srv.Close()
			c, err := New(Config{URL: srv.URL, Token: "t"})
			if err != nil {
				t.Fatal(err)
			}
			root := t.TempDir()
			res, err := c.Follow(t.Context(), p, "dynamic", "r1", FollowOptions{Root: root})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != record.Succeeded {
				t.Errorf("run %s, want succeeded: %+v", res.State, res.Result)
			}
			for i, item := range tt.shards {
				got, err := record.ReadTask(res.Dir, "process", i)
				if err != nil || got.State != record.Succeeded || got.Item != item {
					t.Errorf("process[%d]: %s, item %q (%v); want succeeded, %q", i, got.State, got.Item, err, item)
				}
			}
			rec, err := record.ReadRecord(res.Dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range rec.Steps {
				if s.Name == "process" && s.Items != len(tt.shards) {
					t.Errorf("process recorded with %d items, want %d", s.Items, len(tt.shards))
				}
			}
			other := map[string]string{"large": "small", "small": "large"}[tt.size]
			got, _ := record.ReadTask(res.Dir, other, -1)
			why := fmt.Sprintf(`not taken: pick's size is "%s", and %s runs when it is "%s"`, tt.size, other, other)
			if got.State != record.Skipped || got.Reason != dag.NotTaken || got.Error != why {
				t.Errorf("%s: %s, reason %q, %q; want skipped, %s, %q", other, got.State, got.Reason, got.Error, dag.NotTaken, why)
			}
			for _, s := range []string{"list", "pick", tt.size, "report"} {
				if got, _ := record.ReadTask(res.Dir, s, -1); got.State != record.Succeeded {
					t.Errorf("%s: %s, want succeeded", s, got.State)
				}
			}
		})
	}
}
