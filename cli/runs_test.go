package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestRunsShowCluster writes a cluster run as a second runtime would, with
// record.WriteRecord and record.WriteTask, and checks that runs list and runs show
// report it from what was written: where it ran, and each task's node and reason.
func TestRunsShowCluster(t *testing.T) {
	t.Chdir(t.TempDir())
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rec := record.Record{
		Flow: "quiet", ID: "kube-1", State: record.Failed, Start: start, End: start.Add(90 * time.Second), PID: 42,
		Runtime: "kube", Cluster: "https://10.0.0.1:6443", Context: "staging", Namespace: "ml-team", As: "job",
		Steps: []record.StepInfo{{Name: "one"}, {Name: "fan", After: []string{"one"}, Items: 2}, {Name: "last", After: []string{"fan"}}},
		Error: "step fan[1] failed",
	}
	tasks := []record.Task{
		{Step: "one", State: record.Succeeded, Attempts: 1, Start: start, End: start.Add(10 * time.Second), ExitCode: new(0),
			Pods: []string{"kube-1-one-abc"}, Node: "ip-10-0-1-7"},
		{Step: "fan", Index: new(0), Item: "a", State: record.Succeeded, Attempts: 1, Start: start.Add(10 * time.Second), End: start.Add(20 * time.Second), ExitCode: new(0),
			Pods: []string{"kube-1-fan-0-abc"}, Node: "ip-10-0-1-8"},
		{Step: "fan", Index: new(1), Item: "b", State: record.Failed, Attempts: 3, Start: start.Add(10 * time.Second), End: start.Add(80 * time.Second), ExitCode: new(137),
			Error: "container step used more than its memory limit", Pods: []string{"kube-1-fan-1-def"}, Node: "ip-10-0-1-9", Reason: "OOMKilled"},
		{Step: "last", State: record.Skipped, Error: "not started: fan failed"},
	}
	dir := filepath.Join(record.DefaultRoot, rec.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if err := record.WriteTask(dir, task); err != nil {
			t.Fatal(err)
		}
	}

	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).
		Step("one", sdk.Command("true"))
	runCLI := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := cli.Run(context.Background(), quiet, append([]string{"quiet"}, args...), &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%s: exit status %d; stderr:\n%s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}

	list := table(t, runCLI("runs", "list"), "RUN")
	if len(list) != 1 {
		t.Fatalf("runs list: %q, want one run", list)
	}
	wantWhere := rec.Context + "/" + rec.Namespace
	if got := list[0]; got["RUN"] != rec.ID || got["STATE"] != string(rec.State) || got["WHERE"] != wantWhere {
		t.Errorf("runs list: %q, want run %s, state %s, where %s", got, rec.ID, rec.State, wantWhere)
	}

	out := runCLI("runs", "show", rec.ID)
	lines := strings.Split(out, "\n")
	wantLines := []string{
		fmt.Sprintf("run %s of flow %s: %s", rec.ID, rec.Flow, rec.State),
		fmt.Sprintf("on cluster %s (context %s), namespace %s, as %s", rec.Cluster, rec.Context, rec.Namespace, rec.As),
	}
	if diff := cmp.Diff(wantLines, lines[:2]); diff != "" {
		t.Errorf("runs show, first lines (-want +got):\n%s", diff)
	}
	rows := table(t, out, "STEP")
	var want, got []map[string]string
	for _, task := range tasks {
		exit := ""
		if task.ExitCode != nil {
			exit = strconv.Itoa(*task.ExitCode)
		}
		want = append(want, map[string]string{
			"STEP": task.Label(), "ITEM": task.Item, "STATE": string(task.State), "ATTEMPTS": strconv.Itoa(task.Attempts),
			"EXIT": exit, "NODE": task.Node, "REASON": task.Reason, "ERROR": task.Error,
		})
	}
	for _, row := range rows {
		delete(row, "DURATION")
		got = append(got, row)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("runs show, steps (-want +got):\n%s\n%s", diff, out)
	}
}

// table reads the table of out whose header line starts with first: one map per
// row, from column name to cell. Columns start where their names do.
func table(t *testing.T, out, first string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, first+" ") {
			at = i
			break
		}
	}
	if at < 0 {
		t.Fatalf("no table with column %s in:\n%s", first, out)
	}
	// The names hold no spaces: each starts after a space.
	header := lines[at]
	var names []string
	var starts []int
	for i := range len(header) {
		if header[i] != ' ' && (i == 0 || header[i-1] == ' ') {
			starts = append(starts, i)
			names = append(names, strings.Fields(header[i:])[0])
		}
	}
	var rows []map[string]string
	for _, l := range lines[at+1:] {
		if l == "" {
			break
		}
		row := map[string]string{}
		for i, n := range names {
			end := len(l)
			if i+1 < len(names) {
				end = min(starts[i+1], len(l))
			}
			if starts[i] < end {
				row[n] = strings.TrimSpace(l[starts[i]:end])
			} else {
				row[n] = ""
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// TestRunsShowWithholdsCredentials: runs show prints params and items as the
// record keeps them, except those that look like credentials.
func TestRunsShowWithholdsCredentials(t *testing.T) {
	t.Chdir(t.TempDir())
	const token = "AbCdEfGhIjKlMnOpQrStUv0123"
	const jwt = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiJ0cmFpbmVyIn0.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg"
	start := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rec := record.Record{Flow: "quiet", ID: "run-1", State: record.Succeeded, Start: start, End: start.Add(time.Second),
		Params: map[string]string{"api-token": token, "epochs": "3"},
		Steps:  []record.StepInfo{{Name: "fan", Items: 2}},
		// A record written before URLs lost their passwords.
		Runtime: "airflow", Cluster: "http://admin:urlpass-42@airflow.internal:8080",
		Error: "fan[1] failed: Authorization: Bearer errtoken-42"}
	dir := filepath.Join(record.DefaultRoot, rec.ID)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	for i, item := range []string{"shard-a", jwt} {
		task := record.Task{Step: "fan", Index: new(i), Item: item, State: record.Succeeded, Attempts: 1}
		if i == 1 {
			task.State, task.Reason, task.Error = record.Failed, "Error", "GET https://u:taskpass-42@data.example.com/x: 403"
		}
		if err := record.WriteTask(dir, task); err != nil {
			t.Fatal(err)
		}
	}
	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).Step("fan", sdk.Command("true"), sdk.Foreach("a", "b"))
	// The table, and the documents of -o json and -o yaml, alike.
	for _, args := range [][]string{{"runs", "show", rec.ID}, {"runs", "show", "-o", "json", rec.ID}, {"runs", "show", "-o", "yaml", rec.ID}, {"runs", "list", "-o", "json"}} {
		var stdout, stderr bytes.Buffer
		if code := cli.Run(context.Background(), quiet, append([]string{"quiet"}, args...), &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%s: exit status %d; stderr:\n%s", args, code, stderr.String())
		}
		out := stdout.String()
		for _, secret := range []string{token, jwt, "urlpass-42", "errtoken-42", "taskpass-42"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s prints the credential %q:\n%s", args, secret, out)
			}
		}
		wants := []string{"shard-a", "eyJ… (withheld)", "http://admin:xxxxx@airflow.internal:8080", "https://u:xxxxx@data.example.com/x"}
		switch args[len(args)-2] {
		case "runs", "show":
			wants = append(wants, "api-token=(withheld)", "epochs=3")
		case "json":
			wants = append(wants, `"api-token": "(withheld)"`, `"epochs": "3"`)
		case "yaml":
			wants = append(wants, "api-token: (withheld)", `epochs: "3"`)
		}
		if args[1] == "list" {
			wants = []string{"http://admin:xxxxx@airflow.internal:8080", "Authorization: Bearer"}
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%s does not print %q:\n%s", args, want, out)
			}
		}
	}
}

// TestErrorsWithholdCredentials: an error of a command against an Airflow
// whose URL holds a password does not print the password.
func TestErrorsWithholdCredentials(t *testing.T) {
	t.Chdir(t.TempDir())
	config := filepath.Join(t.TempDir(), "airflow.toml")
	if err := os.WriteFile(config, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MANIFOLD_AIRFLOW_CONFIG", config)
	for _, name := range []string{"MANIFOLD_AIRFLOW_URL", "MANIFOLD_AIRFLOW_TOKEN", "MANIFOLD_AIRFLOW_USERNAME", "MANIFOLD_AIRFLOW_PASSWORD"} {
		t.Setenv(name, "")
	}
	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).Step("a", sdk.Command("true"))
	// Nothing listens on port 1 of loopback.
	for _, url := range []string{"http://admin:clipass-42@127.0.0.1:1", "http://admin:clipass-42@bad host:1"} {
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), quiet, []string{"quiet", "runs", "list", "--target", "airflow", "--airflow-url", url}, &stdout, &stderr)
		if code == cli.ExitOK || !strings.Contains(stderr.String(), "error:") {
			t.Errorf("runs list against %s: exit status %d, stderr %q; want an error", url, code, stderr.String())
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, "clipass-42") {
			t.Errorf("runs list against %s prints the URL's password:\n%s", url, out)
		}
		t.Logf("%s", stderr.String())
	}
}
