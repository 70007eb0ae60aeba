package cli

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/sdk"
)

// TestInterspersed: flags after a command's arguments move in front of them,
// with their values, as the command's flags say; "--" keeps what follows it
// an argument; lines that name no leaf command stay as they are.
func TestInterspersed(t *testing.T) {
	flow := sdk.NewFlow("hello", sdk.Param("name", "x")).Step("greet", sdk.Run(func(*sdk.Context) error { return nil }))
	app := newApp(flow, "hello", io.Discard, io.Discard)
	for _, tc := range []struct {
		name     string
		in, want []string
	}{
		{"value after argument", []string{"hello", "step", "greet", "--param", "name=y"}, []string{"hello", "step", "--param", "name=y", "greet"}},
		{"short flag and =", []string{"hello", "step", "greet", "-p", "a=b", "--param=c=d"}, []string{"hello", "step", "-p", "a=b", "--param=c=d", "greet"}},
		{"bool takes no value", []string{"hello", "runs", "show", "r1", "--artifacts", "r2"}, []string{"hello", "runs", "show", "--artifacts", "r1", "r2"}},
		{"value that looks like an argument or stdout", []string{"hello", "artifact", "get", "r1", "s", "n", "-o", "-"}, []string{"hello", "artifact", "get", "-o", "-", "r1", "s", "n"}},
		{"value that begins with a dash", []string{"hello", "logs", "r1", "--index", "-1"}, []string{"hello", "logs", "--index", "-1", "r1"}},
		{"double dash", []string{"hello", "step", "greet", "--", "--param", "x"}, []string{"hello", "step", "--", "greet", "--param", "x"}},
		{"flags between arguments", []string{"hello", "logs", "r1", "--index", "2", "greet", "--attempt", "1"}, []string{"hello", "logs", "--index", "2", "--attempt", "1", "r1", "greet"}},
		{"unknown flag moves alone", []string{"hello", "logs", "r1", "--bogus", "x"}, []string{"hello", "logs", "--bogus", "r1", "x"}},
		{"completion request stays last", []string{"hello", "logs", "r1", "--index", "2", completionFlag}, []string{"hello", "logs", "--index", "2", "r1", completionFlag}},
		{"unknown command", []string{"hello", "bogus", "x", "--param", "a=b"}, []string{"hello", "bogus", "x", "--param", "a=b"}},
		{"command of subcommands", []string{"hello", "runs", "bogus", "--all"}, []string{"hello", "runs", "bogus", "--all"}},
		{"nothing to move", []string{"hello", "run", "-j", "2"}, []string{"hello", "run", "-j", "2"}},
		{"program alone", []string{"hello"}, []string{"hello"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, interspersed(app, tc.in)); diff != "" {
				t.Errorf("interspersed(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}
