package client_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// TestLinksOutsideRun: a link in a run directory to a file outside it is not
// followed: not for a step's state, nor for its logs.
func TestLinksOutsideRun(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "r1")
	if err := os.MkdirAll(record.StateDir(dir, "one", -1), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteRecord(dir, record.Record{Flow: "f", ID: "r1", State: record.Failed, Steps: []record.StepInfo{{Name: "one"}, {Name: "two"}}}); err != nil {
		t.Fatal(err)
	}
	const sentinel = "SENTINEL-OUTSIDE-THE-RUN"
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte(sentinel+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{record.StdoutLog, record.StderrLog} {
		if err := os.Symlink(secret, filepath.Join(record.StateDir(dir, "one", -1), name)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := client.Open(root).Run("r1")
	if err != nil {
		t.Fatal(err)
	}
	task := r.Step("one").Task()
	for name, read := range map[string]func() ([]byte, error){"Stdout": task.Stdout, "Stderr": task.Stderr} {
		if data, err := read(); err == nil || strings.Contains(string(data), sentinel) {
			t.Errorf("%s = %q, %v: read a file outside the run through a link", name, data, err)
		}
	}

	// A state.json linked to a file outside is not read either.
	stateTarget := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(stateTarget, []byte(`{"step": "two", "state": "failed", "error": "`+sentinel+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(record.StateDir(dir, "two", -1), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(stateTarget, filepath.Join(record.StateDir(dir, "two", -1), record.StateFile)); err != nil {
		t.Fatal(err)
	}
	if r, err := client.Open(root).Run("r1"); err == nil || strings.Contains(err.Error(), sentinel) {
		t.Errorf("Run = %+v, %v: read a state.json outside the run through a link", r, err)
	}
}
