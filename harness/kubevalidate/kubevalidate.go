// Package kubevalidate runs tools/kubevalidate, which checks manifests with the
// Kubernetes API server's own decoding, defaulting and create validation (and custom
// resources against their CRDs), from tests.
package kubevalidate

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/manifoldflow/manifold/harness/toolbin"
)

// Env names a validator already built (make test builds one for every package).
const Env = "MANIFOLD_KUBEVALIDATE"

var tool = &toolbin.Tool{Name: "kubevalidate", Env: Env}

// Build returns the validator: the one Env names, or one compiled once per test
// process (the Go build cache makes later builds quick; the first one on a fresh
// machine takes a minute or two).
func Build(t testing.TB) string { return tool.Build(t) }

// Run validates files and returns what the validator printed and whether every
// object passed.
func Run(t testing.TB, files ...string) (string, bool) {
	t.Helper()
	return tool.Run(t, append(CRDArgs(t), files...)...)
}

// crds are the CustomResourceDefinitions of the custom resources Manifold emits, as
// files of the Go modules that define them.
var crds = []struct{ module, file string }{
	{"sigs.k8s.io/jobset@v0.12.0", "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"},
}

var (
	crdOnce sync.Once
	crdArgs []string
	crdErr  error
)

// CRDArgs returns the validator's --crd arguments, finding each CRD in the Go module
// cache (downloading its module the first time).
func CRDArgs(t testing.TB) []string {
	t.Helper()
	crdOnce.Do(func() {
		for _, c := range crds {
			out, err := exec.Command("go", "mod", "download", "-json", c.module).Output()
			if err != nil {
				crdErr = fmt.Errorf("go mod download %s: %v", c.module, err)
				return
			}
			var m struct{ Dir string }
			if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
				crdErr = fmt.Errorf("go mod download %s: no directory in %s", c.module, out)
				return
			}
			crdArgs = append(crdArgs, "--crd", filepath.Join(m.Dir, filepath.FromSlash(c.file)))
		}
	})
	if crdErr != nil {
		t.Fatalf("finding CRDs: %v", crdErr)
	}
	return crdArgs
}

// Cleanup removes the validator this process built; call it from TestMain after
// m.Run.
func Cleanup() { tool.Cleanup() }
