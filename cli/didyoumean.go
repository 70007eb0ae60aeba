package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/internal/suggest"
)

// usageError is the error of a command line urfave/cli could not parse: an
// unknown flag is named with its command, the flag the user most likely meant
// and where the flags are listed.
func usageError(c *ucli.Context, err error) error {
	const undefined = "flag provided but not defined: "
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, undefined)
	if !ok {
		return usageErr("%v", err)
	}
	name = strings.TrimLeft(name, "-")
	var flags []ucli.Flag
	if c.Command != nil {
		flags = c.Command.Flags
	}
	if len(flags) == 0 {
		flags = c.App.Flags
	}
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
	path := commandPath(c)
	return usageErr("unknown flag %s for %s%s (see %s --help)", dashed(name), path, mean, path)
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
