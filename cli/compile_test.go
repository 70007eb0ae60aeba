package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestCompileRemovesStaleTemps: the temporary files of the flow's outputs that a
// killed compile left are removed by the next compile once they are ten minutes
// old; a newer one, which may be a compile's at work, and other hidden files are
// left.
func TestCompileRemovesStaleTemps(t *testing.T) {
	t.Chdir(t.TempDir())
	flow := sdk.NewFlow("two", sdk.Image("busybox")).Step("a", sdk.Command("true"))
	if err := os.MkdirAll("out", 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-11 * time.Minute)
	for name, mtime := range map[string]time.Time{
		".two.job.yaml.123.tmp":    old,
		".two.argo.yaml.456.tmp":   old,
		".two.jobset.yaml.789.tmp": time.Now(),
		".other.yaml.1.tmp":        old,
		".two.job.yaml.keep":       old,
	} {
		path := filepath.Join("out", name)
		if err := os.WriteFile(path, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Run(context.Background(), flow, []string{"two", "compile", "--target", "all", "-o", "out"}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	for _, name := range []string{".two.job.yaml.123.tmp", ".two.argo.yaml.456.tmp"} {
		if !strings.Contains(stdout.String(), "removed "+filepath.Join("out", name)+": left by a compile that was stopped before it finished\n") {
			t.Errorf("stdout does not say %s was removed:\n%s", name, stdout.String())
		}
	}
	var got []string
	entries, err := os.ReadDir("out")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			got = append(got, e.Name())
		}
	}
	if want := []string{".other.yaml.1.tmp", ".two.job.yaml.keep", ".two.jobset.yaml.789.tmp"}; !slices.Equal(got, want) {
		t.Errorf("hidden files left: %v, want %v", got, want)
	}
}

// TestCompileStreamedWholeOrNothing: the argo target writes a flow's
// WorkflowTemplate as it makes it, and writes the file again, split, when it
// proves too large; compile -o keeps only the last, and a flow refused once
// its file is partly written (a step too large for a part) leaves the output
// directory as it was, with no temporary file.
func TestCompileStreamedWholeOrNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("manifold.toml", []byte("argo_max_bytes = 12000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	chain := sdk.NewFlow("chain", sdk.Image("busybox"))
	for i := range 100 {
		opts := []sdk.StepOption{sdk.Command("echo", strconv.Itoa(i))}
		if i > 0 {
			opts = append(opts, sdk.After("s"+strconv.Itoa(i-1)))
		}
		chain.Step("s"+strconv.Itoa(i), opts...)
	}
	var stdout, stderr bytes.Buffer
	if code := cli.Run(context.Background(), chain, []string{"chain", "compile", "--target", "argo"}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	want := stdout.String()
	if !strings.Contains(want, "manifold.dev/part") {
		t.Fatalf("the 100 steps were not split at 12000 bytes:\n%s", want)
	}
	stdout.Reset()
	if code := cli.Run(context.Background(), chain, []string{"chain", "compile", "--target", "argo", "-o", "out"}, &stdout, &stderr); code != cli.ExitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if got, err := os.ReadFile(filepath.Join("out", "chain.argo.yaml")); err != nil || string(got) != want {
		t.Errorf("out/chain.argo.yaml differs from what compile writes to standard output (%v)", err)
	}
	checkNoTemps(t, "out", []string{"chain.argo.yaml"})

	items := make([]string, 400)
	for i := range items {
		items[i] = strings.Repeat("x", 100) + strconv.Itoa(i)
	}
	big := sdk.NewFlow("big", sdk.Image("busybox")).
		Step("small", sdk.Command("true")).
		Step("huge", sdk.Command("true"), sdk.After("small"), sdk.Foreach(items...))
	if err := os.WriteFile(filepath.Join("out", "big.argo.yaml"), []byte("# an earlier compile\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	stderr.Reset()
	if code := cli.Run(context.Background(), big, []string{"big", "compile", "--target", "all", "-o", "out"}, &stdout, &stderr); code == cli.ExitOK {
		t.Fatalf("a step over argo_max_bytes compiled; stdout:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "huge") || !strings.Contains(stderr.String(), "argo_max_bytes") {
		t.Errorf("stderr does not name the step and the limit:\n%s", stderr.String())
	}
	checkNoTemps(t, "out", []string{"big.argo.yaml", "chain.argo.yaml"})
	if data, _ := os.ReadFile(filepath.Join("out", "big.argo.yaml")); string(data) != "# an earlier compile\n" {
		t.Errorf("big.argo.yaml was replaced: %q", data)
	}
}

// checkNoTemps checks that dir holds exactly the files names.
func checkNoTemps(t *testing.T, dir string, names []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}
