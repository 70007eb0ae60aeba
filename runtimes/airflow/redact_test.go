package airflow

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/otlptest"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/runtimes/tracing"
	"github.com/manifoldflow/manifold/sdk"
)

// TestNoCredentialInOutputs: the password of a URL's userinfo, and foreach
// items that look like credentials, are in no output of a followed run: not
// its errors, its record, its view nor its trace.
func TestNoCredentialInOutputs(t *testing.T) {
	const password = "s3cret-pw-42"
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ0cmFpbmVyIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
	itemURL := "https://reader:itempass-42@data.example.com/shard"
	secrets := []string{password, jwt, "itempass-42", "logpass-42"}
	f := testflows.Compile(t, sdk.NewFlow("secretive", sdk.Image("registry.example.com/s:v1")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.Command("true"), sdk.After("a"), sdk.Foreach("shard-a", jwt, itemURL)))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := "success"
		switch {
		case r.URL.Path == "/auth/token":
			var body map[string]string
			_ = json.NewDecoder(r.Body).Decode(&body)
			if body["username"] != "admin" || body["password"] != password {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"access_token": "t1"})
		case strings.HasSuffix(r.URL.Path, "/taskInstances"):
			tis := []TaskInstance{{TaskID: "a", MapIndex: -1, State: &ok, TryNumber: 1}}
			failed := "failed"
			for i := range 3 {
				state := &ok
				if i == 2 {
					state = &failed
				}
				tis = append(tis, TaskInstance{TaskID: "b", MapIndex: i, State: state, TryNumber: 1})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"task_instances": tis, "total_entries": len(tis)})
		case strings.HasSuffix(r.URL.Path, "/taskInstances/b/logs/1"):
			// The failed item's log quotes a URL with its password.
			_, _ = w.Write([]byte(`{"content": ["fetching https://reader:logpass-42@data.example.com/shard",
				{"event": "failed", "level": "error", "error_detail": [{"exc_type": "HTTPError", "exc_value": "GET https://reader:logpass-42@data.example.com/shard: 403"}]}]}`))
		case strings.HasSuffix(r.URL.Path, "/dagRuns/r1"):
			_ = json.NewEncoder(w).Encode(map[string]any{"dag_run_id": "r1", "dag_id": "secretive", "state": "failed"})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	withPassword := strings.Replace(srv.URL, "http://", "http://admin:"+password+"@", 1)

	rcv := otlptest.New(t)
	rcv.Env(t)
	tr, err := tracing.FromEnv(t.Context())
	if err != nil || tr == nil {
		t.Fatalf("tracing.FromEnv = %v, %v", tr, err)
	}
	c, err := New(Config{URL: withPassword, Username: "admin", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var out strings.Builder
	_, ferr := c.Follow(t.Context(), f, "secretive", "r1", FollowOptions{Root: root, Stdout: &out, Stderr: &out, Tracer: tr})
	if ferr == nil || !strings.Contains(ferr.Error(), "b[2]") {
		t.Fatalf("Follow: %v; want b[2] failed", ferr)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{"the view": out.String(), "URL()": c.URL(), "the follow's error": ferr.Error()}
	if !strings.Contains(out.String(), "https://reader:xxxxx@data.example.com/shard: 403") {
		t.Errorf("the view does not say why b[2] failed, the password withheld:\n%s", out.String())
	}
	runJSON, err := os.ReadFile(filepath.Join(root, "r1", "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	outputs["run.json"] = string(runJSON)
	if !strings.Contains(string(runJSON), srv.URL) {
		t.Errorf("run.json does not name the Airflow at %s:\n%s", srv.URL, runJSON)
	}
	spans := rcv.Spans()
	if len(spans) == 0 {
		t.Fatal("no spans exported")
	}
	for i, s := range spans {
		outputs[fmt.Sprintf("span %d (%s)", i, s.Name)] = fmt.Sprint(s.Attrs, s.Message, s.Events)
	}

	// Errors: of a URL that is no URL, and of an Airflow that does not answer.
	if _, err := New(Config{URL: "http://admin:" + password + "@bad host/", Token: "t"}); err != nil {
		outputs["the error of a bad URL"] = err.Error()
	}
	srv.Close()
	if _, err := c.DAG(t.Context(), "secretive"); err != nil {
		outputs["the error of an Airflow gone"] = err.Error()
	}
	// The URL's user and password alone sign in.
	if c2, err := New(Config{URL: withPassword}); err != nil {
		t.Errorf("a URL with a user and password: %v", err)
	} else if _, err := c2.DAG(t.Context(), "secretive"); err != nil {
		outputs["the error of a sign-in to an Airflow gone"] = err.Error()
	}
	if want := 7 + len(spans); len(outputs) != want {
		t.Errorf("%d outputs, want %d: an error was not made", len(outputs), want)
	}
	for what, text := range outputs {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s holds %q:\n%s", what, s, text)
			}
		}
	}
}
