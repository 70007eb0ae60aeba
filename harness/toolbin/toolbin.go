// Package toolbin builds and runs, from tests, the checkers under tools/: each is a
// Go module of its own (so the SDK's go.mod never takes their requirements) with a
// main package that takes files and exits 1 when it finds a problem.
package toolbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/manifoldflow/manifold/harness/exampletest"
)

// Tool is one checker under tools/.
type Tool struct {
	// Name is its directory under tools/ and the binary's name.
	Name string
	// Env names a binary already built (make test builds one for every package).
	Env string

	once     sync.Once
	bin      string
	buildErr error
	buildOut []byte
}

// Build returns the binary: the one Env names, or one compiled once per test
// process (the Go build cache makes later builds quick; the first one on a fresh
// machine takes a minute or more).
func (t *Tool) Build(tb testing.TB) string {
	tb.Helper()
	t.once.Do(func() {
		if prebuilt := os.Getenv(t.Env); prebuilt != "" {
			if _, t.buildErr = os.Stat(prebuilt); t.buildErr == nil {
				t.bin = prebuilt
			}
			return
		}
		dir, err := os.MkdirTemp("", "manifold-"+t.Name+"-")
		if err != nil {
			t.buildErr = err
			return
		}
		t.bin = filepath.Join(dir, t.Name)
		cmd := exec.Command("go", "build", "-o", t.bin, ".")
		cmd.Dir = filepath.Join(exampletest.Root(), "tools", t.Name)
		t.buildOut, t.buildErr = cmd.CombinedOutput()
	})
	if t.buildErr != nil {
		tb.Fatalf("building tools/%s: %v\n%s", t.Name, t.buildErr, t.buildOut)
	}
	return t.bin
}

// Run checks files and returns what the tool printed and whether every object
// passed. Any exit status other than 0 or 1 fails the test.
func (t *Tool) Run(tb testing.TB, files ...string) (string, bool) {
	tb.Helper()
	cmd := exec.Command(t.Build(tb), files...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return string(out), false
		}
		tb.Fatalf("%s: %v\n%s", t.Name, err, out)
	}
	return string(out), true
}

// Cleanup removes the binary this process built; call it from TestMain after
// m.Run.
func (t *Tool) Cleanup() {
	if t.bin != "" && os.Getenv(t.Env) == "" {
		os.RemoveAll(filepath.Dir(t.bin))
	}
}
