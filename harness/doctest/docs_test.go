package doctest_test

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/doctest"
	"github.com/manifoldflow/manifold/harness/exampletest"
)

// TestMain removes the examples the shell examples ran, built once per test
// binary, when the tests end.
func TestMain(m *testing.M) {
	code := m.Run()
	exampletest.Cleanup()
	os.Exit(code)
}

// TestLinks checks every relative link of README.md and docs/: the file (or
// directory) it names exists, and the #anchor, if any, is a heading of that page
// by GitHub's rules.
func TestLinks(t *testing.T) {
	root := exampletest.Root()
	pages, err := doctest.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		anchors[page] = doctest.Anchors(string(data))
		return anchors[page]
	}
	checked := 0
	for _, page := range pages {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range doctest.Links(string(data)) {
			if regexp.MustCompile(`^[a-z]+:`).MatchString(l.Target) {
				continue // a URL
			}
			checked++
			file, anchor, _ := strings.Cut(l.Target, "#")
			target := page
			if file != "" {
				target = path.Clean(path.Join(path.Dir(page), file))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: link %s leaves the repository", page, l.Line, l.Target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: link %s: no such file %s", page, l.Line, l.Target, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				t.Errorf("%s:%d: link %s: an anchor in a file that is not markdown", page, l.Line, l.Target)
				continue
			}
			if !anchorsOf(target)[anchor] {
				t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", page, l.Line, l.Target, target, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no links were checked")
	}
}

// TestShellExamples runs the shell examples of README.md and docs/ as they are
// written (see package doctest): sh blocks command by command, each of which
// must succeed, and transcripts marked `doctest: output`, whose commands must
// print what the page shows. `go run ./examples/NAME` runs the example's
// program, built once; every block runs in a directory of its own outside the
// module. Blocks marked e2e must name a test of harness/e2e; blocks marked skip
// say why, and every other block must be run. A page's module and file blocks
// are run after its other blocks, as one session in a new module (runModule).
func TestShellExamples(t *testing.T) {
	root := exampletest.Root()
	pages, err := doctest.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	module, err := doctest.ModulePath(root)
	if err != nil {
		t.Fatal(err)
	}
	var e2e bytes.Buffer
	files, _ := filepath.Glob(filepath.Join(root, "harness", "e2e", "*_test.go"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		e2e.Write(data)
	}
	var bins map[string]string
	goRun := regexp.MustCompile(`go run \./examples/([a-z0-9-]+)`)
	for _, page := range pages {
		blocks, err := doctest.Blocks(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Error(err)
			continue
		}
		var session []doctest.Block
		for _, b := range blocks {
			b.File = page
			switch b.Mode {
			case doctest.Skip:
				continue
			case doctest.Module, doctest.File:
				session = append(session, b)
				continue
			case doctest.E2E:
				if !bytes.Contains(e2e.Bytes(), []byte("func "+b.Arg+"(t *testing.T)")) {
					t.Errorf("%s: marked as run by %s, which harness/e2e does not have", b, b.Arg)
				}
				continue
			}
			if b.Mode == doctest.Run && b.Lang != "sh" {
				t.Errorf("%s: a transcript must be marked <!-- doctest: output --> (its commands are run and what they print compared) or <!-- doctest: skip REASON -->", b)
				continue
			}
			if bins == nil {
				bins = exampletest.Build(t)
			}
			t.Run(strings.ReplaceAll(b.String(), "/", "_"), func(t *testing.T) {
				work, env := exampletest.Workspace(t)
				expand := func(cmd string) string {
					return goRun.ReplaceAllStringFunc(cmd, func(m string) string {
						name := goRun.FindStringSubmatch(m)[1]
						if bins[name] == "" {
							t.Fatalf("%s: %s: no example %s", b, cmd, name)
						}
						return bins[name]
					})
				}
				if b.Mode == doctest.Output {
					for _, s := range b.Transcript() {
						sh := exec.Command("sh", "-c", expand(s.Command))
						sh.Dir, sh.Env = work, env
						out, _ := sh.CombinedOutput()
						if !doctest.Matches(s.Output, string(out)) {
							t.Errorf("%s: $ %s printed\n%s\nwhere the page shows\n%s", b, s.Command, out, strings.Join(s.Output, "\n"))
						}
					}
					return
				}
				for _, cmd := range b.Commands() {
					sh := exec.Command("sh", "-c", expand(cmd))
					sh.Dir, sh.Env = work, env
					out, err := sh.CombinedOutput()
					if err != nil {
						t.Errorf("%s: %s: %v\n%s", b, cmd, err, out)
					}
				}
			})
		}
		if len(session) > 0 {
			t.Run(strings.ReplaceAll(page, "/", "_")+"_module", func(t *testing.T) {
				runModule(t, root, module, session)
			})
		}
	}
}

// runModule runs the module and file blocks of a page in order, as a user who
// starts a module of their own would: in a new directory outside the
// repository, where a cd carries over to the commands after it, with the
// environment of doctest.ModuleEnv, and each command as doctest.ModuleCommand
// rewrites it. A file block is written to its path, from the directory the
// commands before it left; an sh block's commands must succeed (the session
// stops at the first that fails, as what follows needs it), and a transcript's
// commands must print what the page shows.
func runModule(t *testing.T, root, module string, blocks []doctest.Block) {
	cwd := t.TempDir()
	pwd := filepath.Join(t.TempDir(), "pwd")
	env := append(doctest.ModuleEnv(os.Environ()), "DOCTEST_PWD="+pwd)
	sh := func(cmd string) (string, []byte, error) {
		run := doctest.ModuleCommand(cmd, module, root)
		c := exec.Command("sh", "-c", "trap 'pwd >\"$DOCTEST_PWD\"' EXIT\n"+run)
		c.Dir, c.Env = cwd, env
		out, err := c.CombinedOutput()
		if dir, rerr := os.ReadFile(pwd); rerr == nil {
			cwd = strings.TrimSuffix(string(dir), "\n")
		}
		if run != cmd {
			run = cmd + " (run as " + run + ")"
		}
		return run, out, err
	}
	modules := 0
	for _, b := range blocks {
		switch {
		case b.Mode == doctest.File:
			file := filepath.Join(cwd, filepath.FromSlash(b.Arg))
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte(b.Text()), 0o644); err != nil {
				t.Fatal(err)
			}
		case b.Lang == "sh":
			modules++
			for _, cmd := range b.Commands() {
				if run, out, err := sh(cmd); err != nil {
					t.Fatalf("%s: %s: %v\n%s", b, run, err, out)
				}
			}
		case b.Lang == "":
			modules++
			for _, s := range b.Transcript() {
				if run, out, _ := sh(s.Command); !doctest.Matches(s.Output, string(out)) {
					t.Errorf("%s: $ %s printed\n%s\nwhere the page shows\n%s", b, run, out, strings.Join(s.Output, "\n"))
				}
			}
		default:
			t.Errorf("%s: a module block is an sh block or a transcript, not %s", b, b.Lang)
		}
	}
	if modules == 0 {
		t.Errorf("%s: file blocks, and no module block that runs anything in their module", blocks[0])
	}
}
