package local_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestFailureNamesOnlyLogsThatExist: the error of a failed step points at
// its stderr.log when the step wrote to stderr, at its stdout.log when it
// wrote only there, and at no log when it wrote nothing.
func TestFailureNamesOnlyLogsThatExist(t *testing.T) {
	for _, tt := range []struct{ name, script, log string }{
		{"stderr", "echo working; echo 'disk full' >&2; exit 3", record.StderrLog},
		{"stdout", "echo 'disk full'; exit 3", record.StdoutLog},
		{"silent", "exit 3", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			flow := sdk.NewFlow("logflow", sdk.Image("registry.example.com/log:v1")).
				Step("bad", sdk.Command("sh", "-c", tt.script))
			r := runFlow(t, t.Context(), flow, local.Options{})
			if r.err == nil {
				t.Fatal("a failing step's run succeeded")
			}
			m := regexp.MustCompile(`\(log: (\S+)\)`).FindStringSubmatch(r.err.Error())
			if tt.log == "" {
				if m != nil || strings.Contains(r.err.Error(), ".log") {
					t.Fatalf("error %q points at a log, but the step wrote none", r.err)
				}
				return
			}
			if m == nil {
				t.Fatalf("error %q points at no log; want its %s", r.err, tt.log)
			}
			if filepath.Base(m[1]) != tt.log {
				t.Errorf("error %q points at %s, want its %s", r.err, m[1], tt.log)
			}
			if _, err := os.Stat(m[1]); err != nil {
				t.Errorf("error %q points at a log that is not there: %v", r.err, err)
			}
		})
	}
}

// TestProgramGoneIsNotRetried: a Command step whose program is gone when its
// attempt starts (an earlier step removed it, or took away its execute
// permission) fails at once, retries left or not, saying what is missing and
// what to do; the program is looked up in the PATH the step itself sets.
func TestProgramGoneIsNotRetried(t *testing.T) {
	for _, tt := range []struct {
		name, spoil string
		want        string
	}{
		{"removed", "rm", `mytool: not found in PATH`},
		{"not-executable", "chmod a-x", `mytool: not executable`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := t.TempDir()
			tool := filepath.Join(bin, "mytool")
			if err := os.WriteFile(tool, []byte("#!/bin/sh\necho ran >> \"$MANIFOLD_ARTIFACTS/ran\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			flow := sdk.NewFlow("goneflow", sdk.Image("registry.example.com/gone:v1")).
				Step("spoil", sdk.Command("sh", "-c", tt.spoil+` "$TOOL"`), sdk.Env("TOOL", tool)).
				Step("use", sdk.After("spoil"), sdk.Command("mytool"), sdk.Env("PATH", bin+":/usr/bin:/bin"), sdk.Retry(2))
			r := runFlow(t, t.Context(), flow, local.Options{})
			if r.err == nil {
				t.Fatal("the run succeeded, though use's program was gone")
			}
			_, tasks := r.tasks(t)
			if got := tasks["use"]; got.State != record.Failed || got.Attempts != 1 {
				t.Errorf("use: %+v, want failed after 1 attempt", got)
			}
			for _, want := range []string{"step use failed: " + tt.want, "install it", "--stub use"} {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error %q lacks %q", r.err, want)
				}
			}
			if strings.Contains(r.stdout, "retrying") {
				t.Errorf("the step was retried:\n%s", r.stdout)
			}
		})
	}
}
