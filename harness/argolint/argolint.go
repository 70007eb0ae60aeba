// Package argolint runs tools/argolint, which checks Argo Workflows manifests with
// Argo's own validator (what `argo lint` runs), from tests.
package argolint

import (
	"testing"

	"github.com/manifoldflow/manifold/harness/toolbin"
)

// Env names a linter already built (make test builds one for every package).
const Env = "MANIFOLD_ARGOLINT"

var tool = &toolbin.Tool{Name: "argolint", Env: Env}

// Build returns the linter: the one Env names, or one compiled once per test
// process (the first build on a fresh machine takes a few minutes: Argo's
// validator brings much of Argo with it).
func Build(t testing.TB) string { return tool.Build(t) }

// Run lints files and returns what the linter printed and whether every object
// passed.
func Run(t testing.TB, files ...string) (string, bool) {
	t.Helper()
	return tool.Run(t, files...)
}

// Cleanup removes the linter this process built; call it from TestMain after
// m.Run.
func Cleanup() { tool.Cleanup() }

// Manifests returns what the linter prints with -manifests: the manifest each
// resource template of files creates, substituted by Argo's own code with uid as
// the workflow's uid, as a YAML stream; and whether it succeeded.
func Manifests(t testing.TB, uid string, files ...string) (string, bool) {
	t.Helper()
	return tool.Run(t, append([]string{"-manifests", uid}, files...)...)
}

// Conditions returns what the linter prints with -conditions: for each object in
// file, whether Argo's executor would take it as failed, succeeded or still
// waiting under the success and failure conditions of a resource template.
func Conditions(t testing.TB, success, failure, file string) (string, bool) {
	t.Helper()
	return tool.Run(t, "-conditions", success, failure, file)
}
