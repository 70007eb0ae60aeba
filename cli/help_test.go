//go:build !manifold_image

package cli

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/sdk"
)

// helpFlow has a param, a Run step and a Command step, so that every
// command's help has something to say.
var helpFlow = sdk.NewFlow("neuron-train", sdk.Image("registry.example.com/ml/neuron-train:v1"), sdk.Param("epochs", "3")).
	Step("prepare", sdk.Run(func(*sdk.Context) error { return nil })).
	Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py"), sdk.Timeout(time.Hour))

// eachCommand calls fn with the path (the program's name first) of every
// command of the app, subcommands too, but help.
func eachCommand(cmds []*ucli.Command, path []string, fn func(path []string, c *ucli.Command)) {
	for _, c := range cmds {
		if c.Name == "help" {
			continue
		}
		p := append(path[:len(path):len(path)], c.Name)
		fn(p, c)
		eachCommand(c.Subcommands, p, fn)
	}
}

// helpOf is what `path --help` prints.
func helpOf(t *testing.T, path []string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), helpFlow, append(path[:len(path):len(path)], "--help"), &out, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("%s --help: exit %d\n%s", strings.Join(path, " "), code, errOut.String())
	}
	return out.String()
}

// TestHelpFits: every line of the app's help and of every command's fits in
// 100 columns.
func TestHelpFits(t *testing.T) {
	const columns = 100
	app := App(helpFlow)
	check := func(path []string) {
		for i, line := range strings.Split(helpOf(t, path), "\n") {
			if n := utf8.RuneCountInString(line); n > columns {
				t.Errorf("%s --help, line %d: %d columns, more than %d:\n%s", strings.Join(path, " "), i+1, n, columns, line)
			}
		}
	}
	check([]string{app.Name})
	eachCommand(app.Commands, []string{app.Name}, func(path []string, _ *ucli.Command) { check(path) })
}

// TestHelpExamples: the help of the app, and of every command, shows an
// example of it.
func TestHelpExamples(t *testing.T) {
	app := App(helpFlow)
	check := func(path []string, _ *ucli.Command) {
		help := helpOf(t, path)
		_, examples, ok := strings.Cut(help, "\n   Examples:\n")
		cmd := strings.Join(path, " ")
		if !ok || !regexp.MustCompile(`(?m)^ {5}`+regexp.QuoteMeta(cmd)+`\b`).MatchString(examples) {
			t.Errorf("%s --help shows no example of %s:\n%s", cmd, cmd, help)
		}
	}
	check([]string{app.Name}, nil)
	eachCommand(app.Commands, []string{app.Name}, check)
}

// placeholderRE matches a flag of help that urfave/cli gave its default
// placeholder, "value".
var placeholderRE = regexp.MustCompile(`(?m)^ +-{1,2}[\w-]+ value\b|, -{1,2}[\w-]+ value\b`)

// TestHelpPlaceholders: every flag that takes a value names it (--target
// TARGET), in every command's help; a flag that takes none shows none.
func TestHelpPlaceholders(t *testing.T) {
	app := App(helpFlow)
	eachCommand(app.Commands, []string{app.Name}, func(path []string, c *ucli.Command) {
		for _, f := range c.Flags {
			if vis, ok := f.(ucli.VisibleFlag); ok && !vis.IsVisible() {
				continue
			}
			if v, ok := f.(interface{ TakesValue() bool }); !ok || !v.TakesValue() {
				// urfave/cli takes a backquoted word for a placeholder even
				// of a bool flag.
				if u, ok := f.(ucli.DocGenerationFlag); ok && strings.Contains(u.GetUsage(), "`") {
					t.Errorf("%s: flag %s takes no value, but its usage names one: %s", strings.Join(path, " "), f.Names()[0], ucli.FlagStringer(f))
				}
				continue
			}
			if s := ucli.FlagStringer(f); placeholderRE.MatchString("   " + s) {
				t.Errorf("%s: flag %s has no placeholder that names its value: %s", strings.Join(path, " "), f.Names()[0], s)
			}
		}
	})
}
