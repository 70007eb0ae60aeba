//go:build !manifold_image

package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/runtimes/airflow"
	"github.com/manifoldflow/manifold/sdk"
)

// airflowREST makes a request of a real Airflow's REST API as a user of its
// own would, apart from Manifold's client: no run ID in the path.
func airflowREST(t *testing.T, base, token, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, data)
	}
	return out
}

// TestAirflowRunIDs drives runs that Airflow's own REST API and CLI
// triggered, outside Manifold, by their IDs through runs show, logs, stop and
// retry against a real Airflow: IDs with a space, a percent sign, a plus, a
// colon, a non-ASCII letter and an escape sequence of their own, and the
// manual__…+00:00 IDs of `airflow dags trigger`. Airflow accepts by default
// only IDs of [A-Za-z0-9_.~:+-] ([scheduler] allowed_run_id_pattern); this
// Airflow is configured to accept any, as an operator may. A run ID with a /
// Airflow accepts, but its API cannot reach: its server decodes %2F before it
// routes the path, so that even its own UI's requests for the run miss it.
// The test's tasks reach no cluster, so they fail at once, which logs and
// retry need.
func TestAirflowRunIDs(t *testing.T) {
	srv := airflowtest.StartServer(t, airflowtest.ServerOptions{
		Config: []string{"AIRFLOW__SCHEDULER__ALLOWED_RUN_ID_PATTERN=^.+$"},
	})
	t.Chdir(t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv(airflow.EnvConfig, "")
	t.Setenv(airflow.EnvToken, "")
	t.Setenv(airflow.EnvURL, srv.URL)
	t.Setenv(airflow.EnvUsername, airflowtest.Username)
	t.Setenv(airflow.EnvPassword, airflowtest.Password)

	flow := sdk.NewFlow("afids", sdk.Image("registry.example.com/ml/afids:v1")).Step("a", sdk.Command("true"))
	p := testflows.Compile(t, flow)
	if r := runAF(t, flow, p, "deploy", "--wait-parsed", "--dags-folder", srv.Dags); r.code != 0 {
		t.Fatalf("deploy --wait-parsed: exit %d", r.code)
	}
	tok, _ := airflowREST(t, srv.URL, "", http.MethodPost, "/auth/token", map[string]string{"username": airflowtest.Username, "password": airflowtest.Password})["access_token"].(string)
	restTrigger := func(id string) {
		t.Helper()
		r := airflowREST(t, srv.URL, tok, http.MethodPost, "/api/v2/dags/afids/dagRuns", map[string]any{"dag_run_id": id, "logical_date": nil, "conf": map[string]any{}})
		if r["dag_run_id"] != id {
			t.Fatalf("Airflow made run %v, not %q", r["dag_run_id"], id)
		}
	}
	manualRE := regexp.MustCompile(`manual__\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00`)
	cliTrigger := func() string {
		t.Helper()
		out := srv.CLI(t, "dags", "trigger", "afids")
		id := manualRE.FindString(out)
		if id == "" {
			t.Fatalf("airflow dags trigger printed no manual__…+00:00 run ID:\n%s", out)
		}
		return id
	}
	ids := []string{"a b", "100%", "x+y:z~1.a", "läuft-ü", "a%2Fb", "a%20b"}

	// Runs of a paused DAG wait: stop each.
	airflowREST(t, srv.URL, tok, http.MethodPatch, "/api/v2/dags/afids", map[string]bool{"is_paused": true})
	var waiting []string
	for _, id := range ids {
		restTrigger("queued-" + id)
		waiting = append(waiting, "queued-"+id)
	}
	waiting = append(waiting, cliTrigger())
	for _, id := range waiting {
		if r := runAF(t, flow, p, "show", id); r.code != 0 || !strings.Contains(r.stdout, "run "+id+" of flow afids: pending\non Airflow "+srv.URL+"\nnot started\n") {
			t.Errorf("runs show %q of a queued run: exit %d; want 0, pending, not started", id, r.code)
		}
		if r := runAF(t, flow, p, "stop", id); r.code != 0 || !strings.Contains(r.stdout, "marked run "+id+" of DAG afids failed") {
			t.Errorf("stop %q: exit %d; want 0, the run marked failed", id, r.code)
		}
		if r := runAF(t, flow, p, "show", id); r.code != 0 || !strings.Contains(r.stdout, "run "+id+" of flow afids: failed") {
			t.Errorf("runs show %q of a stopped run: exit %d; want 0, failed", id, r.code)
		}
	}

	// Runs that ran: their task failed, with a log; retry runs it again.
	airflowREST(t, srv.URL, tok, http.MethodPatch, "/api/v2/dags/afids", map[string]bool{"is_paused": false})
	var ran []string
	for _, id := range ids {
		restTrigger(id)
		ran = append(ran, id)
	}
	ran = append(ran, cliTrigger())
	// Wait for them, listing the runs (no run ID in the path).
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(2 * time.Second) {
		list := airflowREST(t, srv.URL, tok, http.MethodGet, "/api/v2/dags/afids/dagRuns?limit=100", nil)
		runs, _ := list["dag_runs"].([]any)
		var failed []string
		for _, r := range runs {
			m, _ := r.(map[string]any)
			if id, _ := m["dag_run_id"].(string); m["state"] == "failed" && slices.Contains(ran, id) {
				failed = append(failed, id)
			}
		}
		if len(failed) == len(ran) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs failed: %q; want all of %q\n%s", failed, ran, srv.LogTails(30))
		}
	}
	list := runAF(t, flow, p, "list")
	for _, id := range ran {
		if !strings.Contains(list.stdout, id+" ") {
			t.Errorf("runs list does not list run %q", id)
		}
		if r := runAF(t, flow, p, "show", id); r.code != 0 || !strings.Contains(r.stdout, "run "+id+" of flow afids: failed") || !regexp.MustCompile(`(?m)^a\s+failed\s+1\b`).MatchString(r.stdout) {
			t.Errorf("runs show %q: exit %d; want 0, a failed after 1 try", id, r.code)
		}
		// The log names its file, of this run's task and try.
		if r := runAF(t, flow, p, "logs", id, "a"); r.code != 0 || !strings.Contains(r.stdout, "/run_id="+id+"/task_id=a/attempt=1.log") {
			t.Errorf("logs %q a: exit %d; want 0 and the log of its try 1", id, r.code)
		}
		r := runAF(t, flow, p, "retry", id)
		if !strings.Contains(r.stdout, "cleared 1 task of run "+id+": a") || !strings.Contains(r.stderr, "error: step a failed") {
			t.Errorf("retry %q: exit %d; want a cleared, followed, and failed again", id, r.code)
		}
		if r := runAF(t, flow, p, "logs", "--attempt", "2", id, "a"); r.code != 0 || !strings.Contains(r.stdout, "/run_id="+id+"/task_id=a/attempt=2.log") || strings.Contains(r.stdout, "attempt=1.log") {
			t.Errorf("logs --attempt 2 %q a: exit %d; want 0 and the log of its try 2 alone", id, r.code)
		}
	}

	// A / in a run ID: Airflow makes the run, and cannot serve it by its ID.
	restTrigger("a/b")
	if r := runAF(t, flow, p, "show", "a/b"); r.code != ExitInvalid || !strings.Contains(r.stderr, "DAG afids has no run a/b in Airflow") || !strings.Contains(r.stderr, "API route not found") {
		t.Errorf("runs show a/b: exit %d; want %d, Airflow's own route not found", r.code, ExitInvalid)
	}
}
