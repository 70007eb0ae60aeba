package cli_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// TestRunWriters checks that Run writes only to the writers it is given: with
// os.Stdout and os.Stderr swapped for files, those files stay empty.
func TestRunWriters(t *testing.T) {
	quiet := sdk.NewFlow("quiet", sdk.Image("registry.example.com/quiet:v1")).
		Step("one", sdk.Run(func(*sdk.Context) error { return nil }), sdk.CPU("1"), sdk.NoArtifacts())

	// Run steps would start this test binary again; a Command step runs as is.
	shell := sdk.NewFlow("shell", sdk.Image("registry.example.com/shell:v1")).
		Step("say", sdk.Command("sh", "-c", "echo out; echo err >&2"))

	tests := []struct {
		name   string
		flow   *sdk.Flow
		args   []string
		code   int
		stdout string // a substring of what Run writes to stdout; "" for none
		stderr string // a substring of what Run writes to stderr; "" for none
	}{
		{name: "compile", flow: quiet, args: []string{"compile"}, code: cli.ExitOK, stdout: "name: quiet-one"},
		{name: "validate", flow: quiet, args: []string{"validate"}, code: cli.ExitOK, stdout: "flow quiet is valid: 1 step\n"},
		{name: "graph", flow: quiet, args: []string{"graph", "--format", "dot"}, code: cli.ExitOK, stdout: `digraph "quiet"`},
		{name: "help", flow: quiet, args: []string{"--help"}, code: cli.ExitOK, stdout: "COMMANDS:"},
		{name: "step", flow: quiet, args: []string{"step", "one"}, code: cli.ExitOK},
		{name: "run", flow: shell, args: []string{"run"}, code: cli.ExitOK, stdout: "say | out", stderr: "say | err"},
		{name: "runs", flow: shell, args: []string{"runs", "list"}, code: cli.ExitOK, stdout: "RUN"},
		{name: "invalid", flow: badFlow, args: []string{"validate"}, code: cli.ExitInvalid, stderr: "steps[train].trainium: Invalid value: 0"},
		{name: "usage", flow: quiet, args: []string{"compile", "--set", "one.cpu"}, code: cli.ExitUsage, stderr: `error: --set "one.cpu"`},
		{name: "flag", flow: quiet, args: []string{"compile", "--bogus"}, code: cli.ExitUsage, stderr: "error: unknown flag --bogus for quiet compile"},
		{name: "panic", flow: panicFlow, args: []string{"step", "boom"}, code: cli.ExitInvalid, stderr: "panic: kaboom"},
	}
	t.Chdir(t.TempDir()) // no manifold.toml; step's artifacts land here
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			var code int
			leaked := captureStd(t, func() {
				code = cli.Run(context.Background(), tt.flow, append([]string{tt.flow.Name()}, tt.args...), &stdout, &stderr)
			})
			if leaked != "" {
				t.Errorf("Run wrote to os.Stdout or os.Stderr:\n%s", leaked)
			}
			if code != tt.code {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			checkOutput(t, "stdout", stdout.String(), tt.stdout)
			checkOutput(t, "stderr", stderr.String(), tt.stderr)
		})
	}
}

func checkOutput(t *testing.T, name, got, want string) {
	t.Helper()
	switch {
	case want == "" && got != "":
		t.Errorf("%s: got %q, want nothing", name, got)
	case !strings.Contains(got, want):
		t.Errorf("%s: got %q, want it to contain %q", name, got, want)
	}
}

// captureStd runs f with os.Stdout and os.Stderr redirected to a file, and returns
// what was written there.
func captureStd(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.CreateTemp(t.TempDir(), "std")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	stdout, stderr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = file, file
	defer func() { os.Stdout, os.Stderr = stdout, stderr }()
	f()
	data, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
