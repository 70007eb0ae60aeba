//go:build unix

package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestArtifactGetOutputMode: artifact get -o replaces a file keeping its mode,
// and makes a new one with the mode the umask gives.
func TestArtifactGetOutputMode(t *testing.T) {
	t.Chdir(t.TempDir())
	dir := filepath.Join(record.DefaultRoot, "r1")
	if err := os.MkdirAll(filepath.Join(dir, "one"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteRecord(dir, record.Record{Flow: "quiet", ID: "r1", State: record.Succeeded, Steps: []record.StepInfo{{Name: "one"}}}); err != nil {
		t.Fatal(err)
	}
	const model = "{\n  \"layers\": 3\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "one", "model.json"), []byte(model), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("secret.json", []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).Step("one", sdk.Command("true"))
	for file, want := range map[string]os.FileMode{"secret.json": 0o600, "new.json": 0o640} {
		var stdout, stderr bytes.Buffer
		if code := cli.Run(context.Background(), quiet, []string{"quiet", "artifact", "get", "-o", file, "r1", "one", "model"}, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("artifact get -o %s: exit status %d; stderr:\n%s", file, code, stderr.String())
		}
		data, err := os.ReadFile(file)
		if err != nil || string(data) != model {
			t.Errorf("%s holds %q, %v; want the artifact", file, data, err)
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("artifact get -o %s: mode %03o, want %03o", file, got, want)
		}
	}
}
