package doctest_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/harness/doctest"
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

// goBlocks returns the Go blocks of the markdown page at path (relative to
// the module's root), each ending in a newline.
func goBlocks(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(exampletest.Root(), filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	var blocks, cur []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case !in && l == "```go":
			in, cur = true, nil
		case in && l == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n")+"\n")
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// goPrograms returns the Go blocks of a page that are whole flow programs:
// package main, with a main.
func goPrograms(t *testing.T, path string) []string {
	t.Helper()
	var progs []string
	for _, src := range goBlocks(t, path) {
		if strings.HasPrefix(src, "package main\n") && strings.Contains(src, "\nfunc main() {") {
			progs = append(progs, src)
		}
	}
	return progs
}

// buildProgram builds a flow program's source and returns the program's path.
func buildProgram(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	main := filepath.Join(dir, "main.go")
	if err := os.WriteFile(main, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "flow")
	build := exec.Command("go", "build", "-o", bin, main)
	build.Dir = exampletest.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestFlowPrograms builds every whole flow program that README.md and the pages
// under docs/ show, as it is written, and checks that `validate --strict`
// accepts it and that it compiles to every target without a warning, given the
// artifact store the README says steps that pass data need on a cluster: a
// flow a page shows is one a reader copies.
func TestFlowPrograms(t *testing.T) {
	pages, err := doctest.Pages(exampletest.Root())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, page := range pages {
		for i, src := range goPrograms(t, page) {
			found++
			t.Run(fmt.Sprintf("%s#%d", strings.ReplaceAll(page, "/", "_"), i+1), func(t *testing.T) {
				bin := buildProgram(t, src)
				dir := t.TempDir()
				run := func(args ...string) {
					t.Helper()
					cmd := exec.Command(bin, args...)
					cmd.Dir = dir
					var stderr strings.Builder
					cmd.Stderr = &stderr
					if err := cmd.Run(); err != nil {
						t.Errorf("%s's flow: %s: %v\n%s", page, strings.Join(args, " "), err, stderr.String())
					} else if stderr.Len() > 0 {
						t.Errorf("%s's flow: %s printed on standard error:\n%s", page, strings.Join(args, " "), stderr.String())
					}
				}
				const store = "s3://ml-artifacts/flows"
				run("validate", "--strict", "--artifacts", store)
				for _, target := range targets.Names() {
					run("compile", "--target", target, "--artifacts", store, "-o", filepath.Join(dir, target))
				}
			})
		}
	}
	if found == 0 {
		t.Fatal("no page shows a flow program")
	}
}

// TestREADMEFlowRehearses runs the README's flow here as the page says to
// rehearse it, with train stubbed.
func TestREADMEFlowRehearses(t *testing.T) {
	progs := goPrograms(t, "README.md")
	if len(progs) != 1 {
		t.Fatalf("README.md shows %d flow programs, want one", len(progs))
	}
	rehearse := exec.Command(buildProgram(t, progs[0]), "run", "--stub", "train")
	rehearse.Dir = t.TempDir()
	if out, err := rehearse.CombinedOutput(); err != nil {
		t.Errorf("README.md's flow: run --stub train: %v\n%s", err, out)
	}
}

// TestGoFragments builds every Go block of README.md and docs/ that is a
// fragment of a program: its import lines, then statements. The statements
// become the body of a main that also imports context, fmt and log, which such
// fragments use as a program would.
func TestGoFragments(t *testing.T) {
	pages, err := doctest.Pages(exampletest.Root())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, page := range pages {
		for i, block := range goBlocks(t, page) {
			if !strings.HasPrefix(block, "import \"") {
				continue
			}
			found++
			var imports, body []string
			for _, l := range strings.Split(block, "\n") {
				if strings.HasPrefix(l, "import \"") {
					imports = append(imports, strings.TrimPrefix(l, "import "))
				} else {
					body = append(body, "\t"+l)
				}
			}
			src := "package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"log\"\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n" +
				"var _, _, _ = context.Background, fmt.Println, log.Fatal\n\nfunc main() {\n" + strings.Join(body, "\n") + "\n}\n"
			t.Run(fmt.Sprintf("%s#%d", strings.ReplaceAll(page, "/", "_"), i+1), func(t *testing.T) {
				buildProgram(t, src)
			})
		}
	}
	if found == 0 {
		t.Fatal("no page shows a Go fragment with its imports")
	}
}
