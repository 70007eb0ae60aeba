package cli

import (
	"regexp"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/internal/suggest"
)

// Go's flag package's errors of a flag's value, which name it -name.
var (
	needsValueRE = regexp.MustCompile(`^flag needs an argument: -+([\w-]+)$`)
	badValueRE   = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-+([\w-]+): (.*)$`)
)

// usageError is the error of a command line urfave/cli could not parse. It
// names the command and where its flags are listed; an unknown flag, the flag
// the user most likely meant; a flag without its value, the value it takes.
func usageError(c *ucli.Context, err error) error {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	path := commandPath(c)
	var flags []ucli.Flag
	if c.Command != nil {
		flags = c.Command.Flags
	}
	if len(flags) == 0 {
		flags = c.App.Flags
	}
	if m := needsValueRE.FindStringSubmatch(msg); m != nil {
		name := m[1]
		if f := findFlag(flags, name); f != nil {
			name = f.Names()[0]
			if p := placeholder(f); p != "" {
				return usageErr("flag %s of %s needs a value, %s (see %s --help)", dashed(name), path, p, path)
			}
		}
		return usageErr("flag %s of %s needs a value (see %s --help)", dashed(name), path, path)
	}
	if m := badValueRE.FindStringSubmatch(msg); m != nil {
		name, why := m[2], m[3]
		if f := findFlag(flags, name); f != nil {
			name = f.Names()[0]
			switch f.(type) {
			case *ucli.DurationFlag:
				why = "give a duration, such as 90s, 5m or 1h30m"
			case *ucli.IntFlag, *ucli.Int64Flag, *ucli.UintFlag, *ucli.Uint64Flag:
				why = "give a whole number"
			case *ucli.Float64Flag:
				why = "give a number"
			case *ucli.BoolFlag:
				why = "give true or false"
			}
		}
		return usageErr("invalid value %s for flag %s of %s: %s (see %s --help)", m[1], dashed(name), path, why, path)
	}
	name, ok := strings.CutPrefix(msg, undefined)
	if !ok {
		return usageErr("%v", err)
	}
	name = strings.TrimLeft(name, "-")
	var names []string
	for _, f := range flags {
		for _, n := range f.Names() {
			names = append(names, n)
		}
	}
	if ucli.HelpFlag != nil {
		names = append(names, ucli.HelpFlag.Names()...)
	}
	mean := ""
	if s, ok := suggest.Closest(name, names); ok {
		mean = "; did you mean " + dashed(s) + "?"
	}
	return usageErr("unknown flag %s for %s%s (see %s --help)", dashed(name), path, mean, path)
}

// placeholder is the word f's help names its value by (TARGET of --target
// TARGET), "" for a flag without one.
func placeholder(f ucli.Flag) string {
	names, _, _ := strings.Cut(ucli.FlagStringer(f), "\t")
	fields := strings.Fields(names)
	if len(fields) < 2 || strings.HasPrefix(fields[1], "-") || strings.HasPrefix(fields[1], "[") {
		return ""
	}
	return strings.TrimSuffix(fields[1], ",")
}

// dashed is a flag's name as written: -x, or --name.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// commandPath is the command line that reaches c's command, such as
// "hello runs show"; the program's name at the top.
func commandPath(c *ucli.Context) string {
	if c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name {
		return c.App.Name
	}
	if c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return c.App.Name + " " + c.Command.Name
}

// unknownCommand is the error of a word that names none of cmds, the
// commands (or subcommands) of path.
func unknownCommand(path, word string, cmds []*ucli.Command) error {
	var names []string
	for _, cmd := range cmds {
		if cmd.Name != "help" && !cmd.Hidden {
			names = append(names, cmd.Name)
		}
	}
	return usageErr("unknown command %q%s the commands of %s are %s (see %s --help)", word, didYouMeanOr(word, names, ";"), path, strings.Join(names, ", "), path)
}

// didYouMeanOr is "; did you mean X?" for the closest of names to word, else
// sep.
func didYouMeanOr(word string, names []string, sep string) string {
	if s := suggest.DidYouMean(word, names); s != "" {
		return s
	}
	return sep
}

// subcommandsOnly is the action of a command that only groups subcommands:
// its help, or an error naming the unknown subcommand it was given.
func subcommandsOnly(c *ucli.Context) error {
	if c.Args().Present() {
		return unknownCommand(commandPath(c), c.Args().First(), c.Command.Subcommands)
	}
	return ucli.ShowSubcommandHelp(c)
}
