package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// TestCompileInterrupted: a compile interrupted before its files are renamed into
// place exits 130 and leaves the output directory as it was, with no temporary
// file; the same compile, not interrupted, writes.
func TestCompileInterrupted(t *testing.T) {
	t.Chdir(t.TempDir())
	flow := sdk.NewFlow("two", sdk.Image("busybox")).
		Step("a", sdk.Command("true")).
		Step("b", sdk.Command("true"), sdk.After("a"))
	old := filepath.Join("out", "two.job.yaml")
	if err := os.MkdirAll("out", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("# an earlier compile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	if code := cli.Run(ctx, flow, []string{"two", "compile", "--target", "all", "-o", "out"}, &stdout, &stderr); code != cli.ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, cli.ExitInterrupted, stderr.String())
	}
	if !strings.Contains(stderr.String(), "compile interrupted: nothing written to out") || stdout.Len() > 0 {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	entries, err := os.ReadDir("out")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "two.job.yaml" {
		t.Errorf("out holds %v after the interrupted compile, want only two.job.yaml", entries)
	}
	if data, _ := os.ReadFile(old); string(data) != "# an earlier compile\n" {
		t.Errorf("two.job.yaml was replaced: %q", data)
	}

	stdout.Reset()
	stderr.Reset()
	if code := cli.Run(context.Background(), flow, []string{"two", "compile", "--target", "all", "-o", "out"}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if data, _ := os.ReadFile(old); !bytes.Contains(data, []byte("kind: Job")) {
		t.Errorf("two.job.yaml after the compile:\n%s", data)
	}
}
