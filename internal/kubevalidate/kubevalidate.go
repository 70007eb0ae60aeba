// Package kubevalidate runs tools/kubevalidate, which checks manifests with the
// Kubernetes API server's own decoding, defaulting and create validation, from tests.
package kubevalidate

import (
	"testing"

	"github.com/manifoldflow/manifold/internal/toolbin"
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
	return tool.Run(t, files...)
}

// Cleanup removes the validator this process built; call it from TestMain after
// m.Run.
func Cleanup() { tool.Cleanup() }
