package main

import (
	"bytes"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/harness/doctest"
	"github.com/manifoldflow/manifold/sdk"
)

// program is the name the reference gives a flow program.
const program = "myflow"

// machineDefaults are the defaults that depend on the machine the page is made
// on, and the words the page says instead.
var machineDefaults = map[string]string{"max-parallel": "the number of CPUs"}

// CLIReference renders the commands and flags of a flow program.
func CLIReference() ([]byte, error) {
	app := cli.App(sdk.NewFlow(program))
	var b bytes.Buffer
	b.WriteString(generatedNote("go run ./tools/docgen"))
	fmt.Fprintf(&b, "# Command-line reference\n\n")
	fmt.Fprintf(&b, "A flow program's `main` is `cli.Main(flow)`; the program then has the commands\n")
	fmt.Fprintf(&b, "below. `%s` stands for the program (`go run ./examples/hello` is one). With no\n", program)
	fmt.Fprintf(&b, "command, it runs the flow on this machine, as `%s run` does.\n\n", program)
	fmt.Fprintf(&b, "Exit status: 0 on success, 1 when the flow (or its config) is invalid or a step\n")
	fmt.Fprintf(&b, "fails, 2 when the command line is wrong, 130 when a run is interrupted.\n\n")
	b.WriteString("| command | what it does |\n|---|---|\n")
	walk(app.Commands, program, func(path string, c *ucli.Command) {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", path, doctest.Anchor(path), cell(c.Usage))
	})
	b.WriteString("\n")
	walk(app.Commands, program, func(path string, c *ucli.Command) {
		fmt.Fprintf(&b, "## %s\n\n", path)
		if c.Usage != "" {
			fmt.Fprintf(&b, "%s.\n\n", escape(strings.TrimSuffix(sentence(c.Usage), ".")))
		}
		usage := path
		if len(visibleFlags(c.Flags)) > 0 {
			usage += " [flags]"
		}
		if c.ArgsUsage != "" {
			usage += " " + c.ArgsUsage
		} else if len(c.Subcommands) > 0 {
			usage += " COMMAND"
		}
		fmt.Fprintf(&b, "```\n%s\n```\n\n", usage)
		writeDescription(&b, c.Description)
		if len(c.Subcommands) > 0 {
			b.WriteString("Commands:")
			for _, s := range visibleCommands(c.Subcommands) {
				fmt.Fprintf(&b, " [`%s`](#%s)", s.Name, doctest.Anchor(path+" "+s.Name))
			}
			b.WriteString(".\n\n")
		}
		flags := visibleFlags(c.Flags)
		if len(flags) == 0 {
			return
		}
		b.WriteString("| flag | default | meaning |\n|---|---|---|\n")
		for _, f := range flags {
			names, def, usage := describe(f)
			fmt.Fprintf(&b, "| %s | %s | %s |\n", names, def, cell(usage))
		}
		b.WriteString("\n")
	})
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// walk calls fn for every visible command and subcommand, depth first, with its
// full path ("myflow kind up").
func walk(cmds []*ucli.Command, prefix string, fn func(path string, c *ucli.Command)) {
	for _, c := range visibleCommands(cmds) {
		path := prefix + " " + c.Name
		fn(path, c)
		walk(c.Subcommands, path, fn)
	}
}

func visibleCommands(cmds []*ucli.Command) []*ucli.Command {
	var out []*ucli.Command
	for _, c := range cmds {
		if !c.Hidden && c.Name != "help" {
			out = append(out, c)
		}
	}
	return out
}

func visibleFlags(flags []ucli.Flag) []ucli.DocGenerationFlag {
	var out []ucli.DocGenerationFlag
	for _, f := range flags {
		if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		if d, ok := f.(ucli.DocGenerationFlag); ok {
			out = append(out, d)
		}
	}
	return out
}

// describe returns a flag's names (with its value's placeholder), its default
// and its usage without the placeholder's quotes.
func describe(f ucli.DocGenerationFlag) (names, def, usage string) {
	placeholder, usage := unquoteUsage(f.GetUsage())
	if f.TakesValue() && placeholder == "" {
		placeholder = "value"
	}
	var parts []string
	for _, n := range f.Names() {
		dash := "--"
		if len(n) == 1 {
			dash = "-"
		}
		s := dash + n
		if f.TakesValue() {
			s += " " + placeholder
		}
		parts = append(parts, "`"+s+"`")
	}
	names = strings.Join(parts, ", ")
	if d, ok := machineDefaults[f.Names()[0]]; ok {
		return names, d, usage
	}
	def = f.GetDefaultText()
	if def == "" && f.TakesValue() {
		def = f.GetValue()
	}
	switch def {
	case "", "false", `""`, "[]":
		def = ""
	default:
		if !strings.Contains(def, " ") {
			def = "`" + strings.Trim(def, `"`) + "`"
		}
	}
	return names, def, usage
}

// unquoteUsage returns the placeholder a usage names in backquotes, as urfave/cli
// takes it for --help, and the usage without the quotes.
func unquoteUsage(usage string) (placeholder, text string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	placeholder = usage[i+1 : i+1+j]
	return placeholder, usage[:i] + placeholder + usage[i+1+j+1:]
}

// cell makes text fit a table cell.
func cell(text string) string {
	text = strings.ReplaceAll(strings.TrimSpace(text), "\n", " ")
	return strings.ReplaceAll(escape(text), "|", `\|`)
}

// escape keeps markdown from reading text outside its code spans as HTML or
// emphasis: <step> and * are written as they read.
func escape(text string) string {
	var b strings.Builder
	code := false
	for _, r := range text {
		switch {
		case r == '`':
			code = !code
			b.WriteRune(r)
		case code:
			b.WriteRune(r)
		case r == '<':
			b.WriteString("&lt;")
		case r == '*':
			b.WriteString(`\*`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sentence capitalizes text's first letter.
func sentence(text string) string {
	if text == "" {
		return text
	}
	return strings.ToUpper(text[:1]) + text[1:]
}

// generatedNote is the first line of a generated page.
func generatedNote(cmd string) string {
	return fmt.Sprintf("<!-- Generated by %s from the code; do not edit. -->\n\n", cmd)
}

// writeDescription writes a command's description: its prose, then its
// examples (the lines after "Examples:") as a block of shell commands.
func writeDescription(b *bytes.Buffer, description string) {
	prose, examples, _ := strings.Cut(description, "Examples:\n")
	if prose = strings.TrimSpace(prose); prose != "" {
		fmt.Fprintf(b, "%s\n\n", escape(prose))
	}
	if examples = strings.TrimSpace(examples); examples != "" {
		b.WriteString("Examples:\n\n<!-- doctest: skip examples of a program named myflow, which is no real program -->\n```sh\n")
		for _, line := range strings.Split(examples, "\n") {
			fmt.Fprintf(b, "%s\n", strings.TrimSpace(line))
		}
		b.WriteString("```\n\n")
	}
}
