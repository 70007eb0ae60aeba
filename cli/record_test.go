package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDamagedRecordStaysInRun: a record whose step is named ../../x makes no
// command read the files that name reaches outside the run directory: each
// says which file is damaged and what to do, and prints nothing of them.
func TestDamagedRecordStaysInRun(t *testing.T) {
	t.Chdir(t.TempDir())
	dir := filepath.Join(record.DefaultRoot, "r1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	runJSON := `{"flow": "quiet", "id": "r1", "state": "failed", "start": "2026-01-02T03:04:05Z", "steps": [{"name": "../../x"}]}`
	if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(runJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	// _steps/../../x of the run directory is x beside it.
	const sentinel = "SENTINEL-OUTSIDE-THE-RUN"
	outside := filepath.Join(record.DefaultRoot, "x")
	if err := os.MkdirAll(filepath.Join(outside, "name"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"stdout.log": sentinel + "\n", "stderr.log": sentinel + "\n",
		"state.json": `{"step": "../../x", "state": "failed", "attempts": 1, "error": "` + sentinel + `"}`,
	} {
		if err := os.WriteFile(filepath.Join(outside, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).Step("one", sdk.Command("true"))
	for _, args := range [][]string{
		{"logs", "r1"},
		{"logs", "r1", "../../x"},
		{"runs", "show", "r1"},
		{"artifact", "get", "r1", "../../x", "name"},
		{"run", "--run-id", "r1"},
	} {
		var stdout, stderr bytes.Buffer
		code := cli.Run(context.Background(), quiet, append([]string{"quiet"}, args...), &stdout, &stderr)
		out := stdout.String() + stderr.String()
		if code == cli.ExitOK || strings.Contains(out, sentinel) {
			t.Errorf("%s: exit status %d, output:\n%s\nwant an error, and nothing of the files outside the run", strings.Join(args, " "), code, out)
		}
		for _, want := range []string{filepath.Join(dir, "run.json"), "steps[0].name", "delete the run directory"} {
			if !strings.Contains(stderr.String(), want) {
				t.Errorf("%s: stderr %q: want it to name %q", strings.Join(args, " "), stderr.String(), want)
			}
		}
	}
}

// TestRunsListNamesDamaged: runs list lists the runs it can read, and names
// each damaged record on stderr, with what to do, instead of leaving it out
// unsaid.
func TestRunsListNamesDamaged(t *testing.T) {
	t.Chdir(t.TempDir())
	for id, runJSON := range map[string]string{
		"good": `{"flow": "quiet", "id": "good", "state": "succeeded", "start": "2026-01-02T03:04:05Z", "steps": [{"name": "one"}]}`,
		"bad":  `{"flow": "quiet", "id": "bad", "state": "succeeded", "start": "2026-01-02T03:04:05Z", "steps": [{"name": "one", "items": 2000000}]}`,
	} {
		dir := filepath.Join(record.DefaultRoot, id)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(runJSON), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).Step("one", sdk.Command("true"))
	var stdout, stderr bytes.Buffer
	if code := cli.Run(context.Background(), quiet, []string{"quiet", "runs", "list"}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("runs list: exit status %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "\ngood ") || strings.Contains(stdout.String(), "bad") {
		t.Errorf("runs list printed:\n%s\nwant the good run alone", stdout.String())
	}
	for _, want := range []string{"warning: ", filepath.Join(record.DefaultRoot, "bad", "run.json"), "steps[0].items", "delete the run directory"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("runs list: stderr %q: want it to name %q", stderr.String(), want)
		}
	}
}
