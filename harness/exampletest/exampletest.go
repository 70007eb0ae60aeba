// Package exampletest builds the example flow programs for tests that run them as a
// user would.
package exampletest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

var (
	once     sync.Once
	dir      string
	names    []string
	built    []string
	buildErr error
	output   []byte
)

// Root returns the module's root directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Build compiles every program under examples/ once per test process and returns
// their paths by example name. The binaries live in a temporary directory that is
// removed when the process exits through testing.M (see Cleanup).
func Build(t testing.TB) map[string]string {
	t.Helper()
	once.Do(func() {
		dir, buildErr = os.MkdirTemp("", "manifold-examples-")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./examples/...")
		cmd.Dir = Root()
		output, buildErr = cmd.CombinedOutput()
		if buildErr != nil {
			return
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			buildErr = err
			return
		}
		for _, e := range entries {
			built = append(built, e.Name())
			if !slices.Contains(Dynamic, e.Name()) {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
	})
	if buildErr != nil {
		t.Fatalf("building examples: %v\n%s", buildErr, output)
	}
	bins := make(map[string]string, len(built))
	for _, n := range built {
		bins[n] = filepath.Join(dir, n)
	}
	return bins
}

// Dynamic names the examples whose flows fan out over, or branch on, values
// found at run time: Build builds them, but Names leaves them out, since the
// tests that walk every example compile each for every target, and the job
// and jobset targets write static manifests, which cannot hold such a step.
// Their own tests (examples/dynamic) and TestRealNodeDynamic (harness/e2e:
// run --kube, Argo and Airflow on a real node) run them.
var Dynamic = []string{"dynamic"}

// Names returns the example names in order, but for Dynamic; call Build
// first.
func Names() []string { return append([]string(nil), names...) }

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

// GoVersion returns the go directive of the module's go.mod, for the go.mod
// and go.work of a flow built outside it.
func GoVersion(t testing.TB) string {
	t.Helper()
	goMod, err := os.ReadFile(filepath.Join(Root(), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	if v == nil {
		t.Fatal("no go directive in go.mod")
	}
	return string(v[1])
}

// Workspace returns a directory outside the module where the go command finds
// the module through a workspace (go.work), as in a checkout of a flow that uses
// Manifold, and the environment that selects it. Programs that build their own
// flow (image build, run --kube) run there without touching the module.
func Workspace(t testing.TB) (string, []string) {
	t.Helper()
	root := Root()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "go.work"), []byte("go "+GoVersion(t)+"\n\nuse "+root+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") && !strings.HasPrefix(kv, "SOURCE_DATE_EPOCH=") {
			env = append(env, kv)
		}
	}
	return work, append(env, "GOWORK="+filepath.Join(work, "go.work"))
}
