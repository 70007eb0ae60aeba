package doctest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/exampletest"
)

// Limits of the front page: a reader takes it in at one sitting, and its
// performance section compares, it does not list every goal (those are in
// docs/performance.md).
const (
	maxREADMELines     = 150
	maxPerformanceRows = 6
)

// readme returns README.md's lines.
func readme(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(exampletest.Root(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// section returns the lines of the README's "## title" section, up to the next
// heading of that level.
func section(lines []string, title string) []string {
	var out []string
	in := false
	for _, l := range lines {
		if strings.HasPrefix(l, "## ") {
			if in {
				break
			}
			in = l == "## "+title
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	return out
}

// TestREADMELength checks that the front page stays short: at most
// maxREADMELines lines, and a performance table of at most maxPerformanceRows
// rows under its header that links to docs/performance.md for the rest.
func TestREADMELength(t *testing.T) {
	lines := readme(t)
	if len(lines) > maxREADMELines {
		t.Errorf("README.md has %d lines; keep it to %d and move the detail to a page under docs/", len(lines), maxREADMELines)
	}
	perf := section(lines, "Performance")
	if perf == nil {
		t.Fatal("README.md has no \"## Performance\" section")
	}
	rows := 0
	for _, l := range perf {
		if strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "|---") && !strings.HasPrefix(l, "| ---") {
			rows++
		}
	}
	if rows == 0 {
		t.Error("README.md's performance section has no table")
	} else if rows-1 > maxPerformanceRows { // less the header row
		t.Errorf("README.md's performance table has %d rows; keep it to %d and leave the full table to docs/performance.md", rows-1, maxPerformanceRows)
	}
	if !strings.Contains(strings.Join(perf, "\n"), "(docs/performance.md") {
		t.Error("README.md's performance section does not link to docs/performance.md")
	}
}

// TestREADMEFlow builds the Go flow of README.md's "A flow" section as it is
// written, and checks that `validate --strict` accepts it, that it compiles to
// every target without a warning, given the artifact store the page says its
// steps need on a cluster, and that it runs here as the page says to rehearse
// it, with train stubbed.
func TestREADMEFlow(t *testing.T) {
	var src []string
	in := false
	for _, l := range section(readme(t), "A flow") {
		switch {
		case l == "```go":
			in = true
		case in && l == "```":
			in = false
		case in:
			src = append(src, l)
		}
		if !in && src != nil {
			break
		}
	}
	if src == nil {
		t.Fatal("README.md's \"A flow\" section has no go block")
	}
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(strings.Join(src, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "flow")
	build := exec.Command("go", "build", "-o", bin, main)
	build.Dir = exampletest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of README.md's flow: %v\n%s", err, out)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("README.md's flow: %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		} else if stderr.Len() > 0 {
			t.Errorf("README.md's flow: %s printed on standard error:\n%s", strings.Join(args, " "), stderr.String())
		}
	}
	const store = "s3://ml-artifacts/flows"
	run("validate", "--strict", "--artifacts", store)
	for _, target := range []string{"job", "jobset", "argo", "airflow"} {
		run("compile", "--target", target, "--artifacts", store, "-o", filepath.Join(dir, target))
	}
	rehearse := exec.Command(bin, "run", "--stub", "train")
	rehearse.Dir = dir
	if out, err := rehearse.CombinedOutput(); err != nil {
		t.Errorf("README.md's flow: run --stub train: %v\n%s", err, out)
	}
}
