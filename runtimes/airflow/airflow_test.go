package airflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/emit"
	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/sdk"
)

var flow = sdk.NewFlow("deployflow", sdk.Image("registry.example.com/deploy:v1")).
	Step("a", sdk.Command("true")).
	Step("b", sdk.Command("true"), sdk.After("a"), sdk.Foreach("x", "y"))

// TestDeploy: the files are what the airflow target emits, written in order,
// with no temporary file left; a second deploy replaces them; undeploy
// removes exactly them.
func TestDeploy(t *testing.T) {
	dir := t.TempDir()
	p := testflows.Compile(t, flow)
	dep, err := Deploy(dir, p, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "deployflow.kpo.json"), filepath.Join(dir, "deployflow.py")}
	if diff := cmp.Diff(want, dep.Files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	files, errs := emit.Files(emitairflow.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s differs from what the airflow target emits", f.Name)
		}
		if strings.HasSuffix(f.Name, ".py") && !bytes.Equal(dep.Source, f.Data) {
			t.Errorf("Deployed.Source is not the DAG file")
		}
	}
	if dep.DAGID != "deployflow" {
		t.Errorf("DAG id %q, want deployflow", dep.DAGID)
	}
	other := filepath.Join(dir, "other.py")
	if err := os.WriteFile(other, []byte("# someone else's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Deploy(dir, p, false); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"deployflow.kpo.json", "deployflow.py", "other.py"}, names); diff != "" {
		t.Errorf("dags folder after two deploys (-want +got):\n%s", diff)
	}
	removed, err := Undeploy(dir, "deployflow")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{want[1], want[0]}, removed); diff != "" {
		t.Errorf("removed (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("undeploy removed another DAG: %v", err)
	}
	if removed, err := Undeploy(dir, "deployflow"); err != nil || len(removed) != 0 {
		t.Errorf("second undeploy: %v, %v; want nothing removed", removed, err)
	}
}

// TestUndeployForeign: a DAG file of the flow's name that manifold did not
// write stays, and so does its companion.
func TestUndeployForeign(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"deployflow.py": "# my own DAG\n", "deployflow.kpo.json": "{}"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Undeploy(dir, "deployflow"); err == nil || !strings.Contains(err.Error(), "was not written by manifold") {
		t.Errorf("Undeploy = %v; want an error saying the file is not manifold's", err)
	}
	for _, name := range []string{"deployflow.py", "deployflow.kpo.json"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestDeployMissingFolder: a dags folder that does not exist is an error,
// and nothing is written.
func TestDeployMissingFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nope")
	if _, err := Deploy(dir, testflows.Compile(t, flow), false); err == nil || !strings.Contains(err.Error(), "dags folder") {
		t.Errorf("Deploy = %v; want an error naming the dags folder", err)
	}
}

// TestLoadConfig: the environment overrides the file; a file holding a
// credential that others can read is refused, and so is an unknown key.
func TestLoadConfig(t *testing.T) {
	for _, e := range []string{EnvURL, EnvToken, EnvUsername, EnvPassword, EnvConfig} {
		t.Setenv(e, "")
	}
	path := filepath.Join(t.TempDir(), "airflow.toml")
	write := func(data string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("url = \"http://file:8080\"\ndags_folder = \"/dags\"\nusername = \"u\"\npassword = \"p\"\n", 0o600)
	t.Setenv(EnvURL, "http://env:8080")
	got, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{URL: "http://env:8080", DagsFolder: "/dags", Username: "u", Password: "p"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	write("password = \"p\"\n", 0o644)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a readable file with a password: %v; want an error saying chmod 600", err)
	}
	write("passwd = \"p\"\n", 0o600)
	if _, err := LoadConfig(path); err == nil || !strings.Contains(err.Error(), "unknown key passwd") {
		t.Errorf("an unknown key: %v; want it named", err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "none.toml")); err != nil {
		t.Errorf("no config file at the default place: %v; want none needed", err)
	}
	t.Setenv(EnvConfig, filepath.Join(t.TempDir(), "none.toml"))
	if _, err := LoadConfig(ConfigPath()); err == nil {
		t.Error("a config file named by the environment that does not exist: no error")
	}
}

// TestNew: a client needs a URL and credentials, and says where to put them.
func TestNew(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "--airflow-url"},
		{Config{URL: "localhost:8080", Token: "t"}, "http:// or https://"},
		{Config{URL: "http://localhost:8080", Username: "u"}, EnvPassword},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v; want an error saying %s", c.cfg, err, c.want)
		}
	}
}

// TestSignIn: the user and password are exchanged for a token once, and again
// when the API refuses the token.
func TestSignIn(t *testing.T) {
	var signIns atomic.Int32
	token := "t1"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/auth/token":
			var body map[string]string
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body["username"] != "u" || body["password"] != "p" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			signIns.Add(1)
			_ = json.NewEncoder(w).Encode(map[string]string{"access_token": token})
		case "/api/v2/dags/d":
			if r.Header.Get("Authorization") != "Bearer "+token {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write([]byte(`{"detail":"Invalid JWT token"}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"dag_id": "d", "is_paused": true})
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"detail":"not here"}`))
		}
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Username: "u", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d, err := c.DAG(t.Context(), "d"); err != nil || !d.IsPaused {
			t.Fatalf("DAG = %+v, %v", d, err)
		}
	}
	token = "t2" // the first token expires
	if _, err := c.DAG(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	if n := signIns.Load(); n != 2 {
		t.Errorf("%d sign-ins, want 2 (the first request, and after the token expired)", n)
	}
	_, err = c.DAG(t.Context(), "nosuch")
	var ae *APIError
	if !NotFound(err) || !errors.As(err, &ae) || ae.Detail != "not here" {
		t.Errorf("a missing DAG: %v; want the API's 404 with its detail", err)
	}
	bad, _ := New(Config{URL: srv.URL, Username: "u", Password: "wrong"})
	if _, err := bad.DAG(t.Context(), "d"); err == nil || !strings.Contains(err.Error(), "signing in to Airflow as u") {
		t.Errorf("a wrong password: %v; want the sign-in refused", err)
	}
}

// TestTaskLog: a structured log as lines, the last exception without the pod
// the pod operator appends to it.
func TestTaskLog(t *testing.T) {
	l := &TaskLog{}
	for _, m := range []string{
		`"plain line"`,
		`{"timestamp":"2026-01-01T00:00:00Z","level":"info","event":"Building pod p-1"}`,
		`{"timestamp":"2026-01-01T00:00:01Z","level":"error","event":"Task failed with exception","error_detail":[{"exc_type":"AirflowException","exc_value":"Pod p-1 returned a failure.\nout of memory\nremote_pod: {'kind': 'Pod',\n 'spec': {}}"}]}`,
	} {
		l.add(json.RawMessage(m))
	}
	if want := "AirflowException: Pod p-1 returned a failure. out of memory"; l.Exception != want {
		t.Errorf("Exception = %q, want %q", l.Exception, want)
	}
	wantText := "plain line\n2026-01-01T00:00:00Z INFO Building pod p-1\n2026-01-01T00:00:01Z ERROR Task failed with exception\n" +
		"  AirflowException: Pod p-1 returned a failure.\n    out of memory\n    remote_pod: {'kind': 'Pod',\n     'spec': {}}\n"
	if diff := cmp.Diff(wantText, l.Text()); diff != "" {
		t.Errorf("Text (-want +got):\n%s", diff)
	}
	wantTail := []string{
		"2026-01-01T00:00:01Z ERROR Task failed with exception",
		"  AirflowException: Pod p-1 returned a failure.",
		"    out of memory (the pod follows in the full log)",
	}
	if diff := cmp.Diff(wantTail, l.Tail(3)); diff != "" {
		t.Errorf("Tail (-want +got):\n%s", diff)
	}
}

// TestFollowAPIErrors: an API server that fails for a while is asked again,
// and the follow goes on; one that refuses the request ends it at once, and
// the run is recorded interrupted, not failed.
func TestFollowAPIErrors(t *testing.T) {
	t.Chdir(t.TempDir())
	p := testflows.Compile(t, sdk.NewFlow("apiflow", sdk.Image("registry.example.com/api:v1")).Step("a", sdk.Command("true")))
	var calls atomic.Int32
	var gone atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case gone.Load():
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"detail":"The DagRun with dag_id: apiflow and run_id: r2 was not found"}`))
		case n <= 2:
			w.WriteHeader(http.StatusServiceUnavailable)
		case strings.HasSuffix(r.URL.Path, "/taskInstances"):
			_ = json.NewEncoder(w).Encode(map[string]any{"task_instances": []map[string]any{
				{"task_id": "a", "map_index": -1, "state": "success", "try_number": 1},
			}, "total_entries": 1})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"dag_run_id": "r1", "dag_id": "apiflow", "state": "success"})
		}
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := c.Follow(t.Context(), p, "apiflow", "r1", FollowOptions{Stdout: &out})
	if err != nil || res.State != "succeeded" {
		t.Fatalf("Follow through a short outage = %+v, %v; want succeeded\n%s", res, err, out.String())
	}
	if !strings.Contains(out.String(), "Airflow does not answer") || !strings.Contains(out.String(), "Airflow answers again") {
		t.Errorf("the outage was not told:\n%s", out.String())
	}

	gone.Store(true)
	res, err = c.Follow(t.Context(), p, "apiflow", "r2", FollowOptions{Stdout: &out})
	if !NotFound(err) || res == nil || res.State != "interrupted" {
		t.Errorf("Follow of a run the API does not have = %+v, %v; want the 404, and the run interrupted", res, err)
	}
}

// TestWriteAgain: a write that asks for a state (PATCH: marking a run
// failed) is made again while the API answers it with a server error, as
// Airflow does while its database is locked, and gives up after the last
// pause; an action (POST) and a refusal (409) are made once.
func TestWriteAgain(t *testing.T) {
	pauses := writePauses
	writePauses = []time.Duration{time.Millisecond, time.Millisecond, time.Millisecond}
	t.Cleanup(func() { writePauses = pauses })

	var failFirst atomic.Int32 // PATCHes to answer 500 before one succeeds
	var patches, posts atomic.Int32
	var status atomic.Int32 // the status of a failed PATCH
	status.Store(http.StatusInternalServerError)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodPatch:
			if patches.Add(1) <= failFirst.Load() {
				w.WriteHeader(int(status.Load()))
				_, _ = w.Write([]byte(`{"reason":"Database error","message":"Serious error when handling your request."}`))
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"dag_run_id": "r1", "dag_id": "d", "state": "failed"})
		case http.MethodPost:
			posts.Add(1)
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}

	failFirst.Store(2)
	run, err := c.Stop(t.Context(), "d", "r1")
	if err != nil || run.State != RunFailed || patches.Load() != 3 {
		t.Errorf("Stop through two 500s = %+v, %v after %d PATCHes; want the run failed after 3", run, err, patches.Load())
	}

	patches.Store(0)
	failFirst.Store(100)
	_, err = c.Stop(t.Context(), "d", "r1")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError || patches.Load() != 4 {
		t.Errorf("Stop while the API fails = %v after %d PATCHes; want its 500 after 4", err, patches.Load())
	}

	patches.Store(0)
	status.Store(http.StatusConflict)
	if _, err := c.Stop(t.Context(), "d", "r1"); !errors.As(err, &ae) || ae.Status != http.StatusConflict || patches.Load() != 1 {
		t.Errorf("Stop refused = %v after %d PATCHes; want its 409 after 1", err, patches.Load())
	}

	if _, err := c.Clear(t.Context(), "d", "r1"); !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError || posts.Load() != 1 {
		t.Errorf("Clear while the API fails = %v after %d POSTs; want its 500 after 1", err, posts.Load())
	}
}
