package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// completionFlag is the flag urfave/cli's shell completion ends a command
// line with, to ask for the candidates of its last word.
const completionFlag = "--generate-bash-completion"

// interspersed returns args (args[0] is the program name) with the flags
// written after a command's arguments moved in front of them, so that
// `runs show RUN -o json` parses as `runs show -o json RUN`: Go's flag
// package, which urfave/cli parses with, stops at the first argument. The
// command's own flag definitions say which flags take a value (the word after
// them moves with them); everything after "--" stays an argument. Only the
// arguments of a command without subcommands move; a line that names no such
// command is returned as it is, for urfave/cli to report.
func interspersed(app *ucli.App, args []string) []string {
	if len(args) < 2 {
		return args
	}
	tail := args[1:]
	complete := tail[len(tail)-1] == completionFlag
	if complete {
		tail = tail[:len(tail)-1]
	}
	out := []string{args[0]}
	flags, cmds := app.Flags, app.Commands
	var cmd *ucli.Command
	i := 0
	// The command path, with the flags of each level where they are.
	for i < len(tail) {
		tok := tail[i]
		if tok == "--" {
			break
		}
		if isFlagToken(tok) {
			out, i = append(out, tok), i+1
			if takesValue(flags, tok) && i < len(tail) {
				out, i = append(out, tail[i]), i+1
			}
			continue
		}
		next := findCommand(cmds, tok)
		if next == nil {
			break
		}
		cmd = next
		out, i = append(out, tok), i+1
		flags, cmds = cmd.Flags, cmd.Subcommands
	}
	if cmd == nil || len(cmd.Subcommands) > 0 || cmd.SkipFlagParsing {
		return args
	}
	var moved, positional []string
	dashes := false
	for ; i < len(tail); i++ {
		tok := tail[i]
		switch {
		case dashes:
			positional = append(positional, tok)
		case tok == "--":
			dashes = true
		case isFlagToken(tok):
			moved = append(moved, tok)
			if takesValue(flags, tok) && i+1 < len(tail) {
				i++
				moved = append(moved, tail[i])
			}
		default:
			positional = append(positional, tok)
		}
	}
	out = append(out, moved...)
	if dashes {
		out = append(out, "--")
	}
	out = append(out, positional...)
	if complete {
		out = append(out, completionFlag)
	}
	return out
}

// isFlagToken reports whether tok is written as a flag: -x, --name or
// --name=value (a lone "-" is an argument, standard input or output).
func isFlagToken(tok string) bool {
	return len(tok) > 1 && tok[0] == '-' && tok != "--"
}

// flagName is the name of flag token tok, without its dashes and value.
func flagName(tok string) string {
	name, _, _ := strings.Cut(strings.TrimLeft(tok, "-"), "=")
	return name
}

// takesValue reports whether flag token tok, of one of flags, takes the next
// word as its value: a flag that takes a value and holds none after "=". An
// unknown flag takes none; urfave/cli refuses it.
func takesValue(flags []ucli.Flag, tok string) bool {
	if strings.Contains(tok, "=") {
		return false
	}
	f := findFlag(flags, flagName(tok))
	if f == nil {
		return false
	}
	v, ok := f.(interface{ TakesValue() bool })
	return !ok || v.TakesValue()
}

func findFlag(flags []ucli.Flag, name string) ucli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}
