// Package pyenv finds, for tests, the Python of an environment that a
// tools/<name>/venv.sh script builds and caches (Airflow, moto's S3 server).
package pyenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/manifoldflow/manifold/harness/exampletest"
)

// Env is one environment: tools/<Tool>/venv.sh builds it from
// tools/<Tool>/constraints.txt, and the variable Var names the Python of one
// already built (make test sets it).
type Env struct {
	Var  string
	Tool string
	// What names the environment in a failure, such as "Airflow test environment".
	What string

	once     sync.Once
	python   string
	buildErr error
	buildOut string
}

// Python returns the environment's interpreter: the one Var names, else the one
// venv.sh builds or finds in its cache (once per test process). It never skips:
// without it, t fails and says how to get it.
func (e *Env) Python(t testing.TB) string {
	t.Helper()
	e.once.Do(func() {
		if p := os.Getenv(e.Var); p != "" {
			e.python = p
			_, e.buildErr = os.Stat(p)
			return
		}
		cmd := exec.Command(filepath.Join(exampletest.Root(), "tools", e.Tool, "venv.sh"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		e.python, e.buildErr, e.buildOut = strings.TrimSpace(string(out)), err, stderr.String()
	})
	if e.buildErr != nil {
		t.Fatalf("no %s (%s=%q): %v\n%s\nbuild it with tools/%s/venv.sh (it needs python3 and PyPI), or point %s at the Python of an environment with the packages of tools/%s/constraints.txt",
			e.What, e.Var, os.Getenv(e.Var), e.buildErr, e.buildOut, e.Tool, e.Var, e.Tool)
	}
	return e.python
}
