package cli

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// Shell completion speaks urfave/cli's protocol: the shell runs the program
// with the words of the line so far and completionFlag last, and the program
// prints the candidates, one a line. The scripts of the completion command
// always pass the word being completed (maybe "") before completionFlag, so
// that `--set <TAB>` (a value) is told from `--set<TAB>` (a flag).

// completionCommand prints the script that makes a shell complete this
// program's command line.
func completionCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print the script that completes this program's commands, flags, steps and run IDs in a shell",
		ArgsUsage: "bash|zsh|fish",
		Description: "Prints a completion script for the shell named. It asks this program for the candidates of\n" +
			"each word: commands, subcommands, flags, the flow's steps (step, --set, --stub), params\n" +
			"(--param), targets, and the run IDs recorded here (runs show, logs, resume, artifact get).\n\n" +
			"To load it in the current shell, and for every new one:\n\n" +
			"   source <(PROGRAM completion bash)      # bash; in ~/.bashrc to keep it\n" +
			"   source <(PROGRAM completion zsh)       # zsh, after compinit; in ~/.zshrc to keep it\n" +
			"   PROGRAM completion fish | source       # fish; or > ~/.config/fish/completions/PROGRAM.fish",
		Action: func(c *ucli.Context) error {
			if err := args(c, "completion", "bash|zsh|fish", 1, 1); err != nil {
				return err
			}
			name := c.App.Name
			fn := "_" + regexp.MustCompile(`[^A-Za-z0-9_]`).ReplaceAllString(name, "_") + "_complete"
			switch shell := c.Args().First(); shell {
			case "bash":
				_, err := fmt.Fprintf(c.App.Writer, bashCompletion, name, fn, completionFlag, fn, name)
				return err
			case "zsh":
				_, err := fmt.Fprintf(c.App.Writer, zshCompletion, name, fn, completionFlag, fn, name)
				return err
			case "fish":
				static, err := c.App.ToFishCompletion()
				if err != nil {
					return invalidErr(fmt.Errorf("completion fish: %w", err))
				}
				fmt.Fprintln(c.App.Writer, static)
				_, err = fmt.Fprintf(c.App.Writer, fishCompletion, name, fn, completionFlag, name, fn)
				return err
			default:
				return usageErr("completion %q: choose bash, zsh or fish", shell)
			}
		},
	}
}

// bashCompletion is the bash script: name, function, flag, function, name.
// It reads the line itself (COMP_LINE), so that "=" and ":" (word breaks
// for bash) stay in the words the program sees.
const bashCompletion = `# bash completion for %[1]s: source <(%[1]s completion bash)
%[2]s() {
    local line="${COMP_LINE:0:COMP_POINT}" cur="" IFS=$' \t\n'
    local -a words
    read -r -a words <<<"$line"
    if [[ -n "$line" && "$line" != *[[:space:]] ]]; then
        cur="${words[${#words[@]}-1]}"
        unset 'words[${#words[@]}-1]'
    fi
    local out
    out=$("${words[0]}" "${words[@]:1}" "$cur" %[3]s 2>/dev/null) || return 0
    IFS=$'\n'
    COMPREPLY=($(compgen -W "$out" -- "$cur"))
    # bash replaces only what follows the last "=" or ":" of the word.
    if [[ "$cur" == *[=:]* ]]; then
        local done="${cur%%"${cur##*[=:]}"}"
        COMPREPLY=("${COMPREPLY[@]#"$done"}")
    fi
    # A candidate that asks for more (STEP.OPTION=, NAME=) takes no space.
    if [[ ${#COMPREPLY[@]} -eq 1 && "${COMPREPLY[0]}" == *[=.] ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -o bashdefault -o default -F %[4]s %[5]s
`

// zshCompletion is the zsh script: name, function, flag, function, name.
const zshCompletion = `#compdef %[1]s
# zsh completion for %[1]s: source <(%[1]s completion zsh), after compinit
%[2]s() {
    local -a opts spaced unspaced
    local o
    opts=("${(@f)$(${words[1]} "${(@)words[2,CURRENT-1]}" "${words[CURRENT]}" %[3]s 2>/dev/null)}")
    for o in "${opts[@]}"; do
        [[ -z "$o" ]] && continue
        if [[ "$o" == *[=.] ]]; then unspaced+=("$o"); else spaced+=("$o"); fi
    done
    (( ${#spaced} )) && compadd -- "${spaced[@]}"
    (( ${#unspaced} )) && compadd -S '' -- "${unspaced[@]}"
    (( ${#spaced} + ${#unspaced} )) || _files
}
compdef %[4]s %[5]s
`

// fishCompletion follows urfave/cli's fish script (commands and flags, with
// their usage): name, function, flag, name, function. It adds the candidates
// only the program knows: steps, params, run IDs, flag values.
const fishCompletion = `# The flow's steps, params, run IDs and flag values, from %[1]s itself.
function %[2]s
    set -l words (commandline -opc)
    %[1]s $words[2..-1] (commandline -ct) %[3]s 2>/dev/null
end
complete -c %[4]s -a '(%[5]s)'
`

// completions returns the candidates for the word cur of the command line
// words (words[0] is the program), for flow.
func completions(app *ucli.App, flow *sdk.Flow, words []string, cur string) []string {
	// A line without a command runs the flow: its flags are the app's and
	// run's.
	run := findCommand(app.Commands, "run")
	flags, cmds := append(slices.Clip(app.Flags), run.Flags...), app.Commands
	var path []string
	var cmd *ucli.Command
	var positional []string
	pending := "" // a flag whose value cur is
	dashes := false
	for i := 1; i < len(words); i++ {
		tok := words[i]
		switch {
		case dashes:
			positional = append(positional, tok)
		case tok == "--":
			dashes = true
		case isFlagToken(tok):
			if takesValue(flags, tok) {
				if i+1 == len(words) {
					pending = flagName(tok)
				}
				i++
			}
		case len(positional) == 0 && findCommand(cmds, tok) != nil:
			cmd = findCommand(cmds, tok)
			path = append(path, cmd.Name)
			flags, cmds = cmd.Flags, cmd.Subcommands
		default:
			positional = append(positional, tok)
		}
	}
	if cmd == nil && len(positional) == 0 && len(words) > 1 && isFlagToken(words[1]) && !isVersionFlag(words[1]) && !helpFlag(words[1]) {
		cmd, path = run, []string{"run"}
	}
	command := strings.Join(path, " ")
	switch {
	case pending != "":
		return flagValues(flow, command, pending)
	case !dashes && strings.HasPrefix(cur, "-"):
		if name, _, ok := strings.Cut(strings.TrimLeft(cur, "-"), "="); ok {
			var out []string
			for _, v := range flagValues(flow, command, name) {
				out = append(out, "--"+name+"="+v)
			}
			return out
		}
		return flagNames(flags)
	case cmd == nil:
		if len(positional) > 0 {
			return nil
		}
		return commandNames(app.Commands)
	case len(cmd.Subcommands) > 0:
		if len(positional) > 0 {
			return nil
		}
		return commandNames(cmd.Subcommands)
	}
	return argValues(flow, command, len(positional))
}

// flagNames are the names of the visible flags, as written, and --help.
func flagNames(flags []ucli.Flag) []string {
	var out []string
	for _, f := range flags {
		if v, ok := f.(ucli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		for _, n := range f.Names() {
			out = append(out, dashed(n))
		}
	}
	return append(out, "--help")
}

// commandNames are the names of the visible commands, and help.
func commandNames(cmds []*ucli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Name)
		}
	}
	return append(out, "help")
}

// argValues are the candidates of argument i (from 0) of command.
func argValues(flow *sdk.Flow, command string, i int) []string {
	switch {
	case command == "step" && i == 0:
		return stepNames(flow, true)
	case command == "completion" && i == 0:
		return []string{"bash", "zsh", "fish"}
	case i == 0 && slices.Contains([]string{"runs show", "logs", "resume", "artifact get"}, command):
		return runIDs(flow)
	case i == 1 && slices.Contains([]string{"logs", "artifact get"}, command):
		return stepNames(flow, false)
	}
	return nil
}

// flagValues are the candidates of the value of flag name of command.
func flagValues(flow *sdk.Flow, command, name string) []string {
	switch name {
	case "target", "t":
		if command == "compile" || command == "validate" {
			return append(targetNames(), "all")
		}
		return []string{targetArgo, targetAirflow}
	case "set":
		var out []string
		for _, s := range stepNames(flow, false) {
			for _, o := range compile.SetOptions() {
				out = append(out, s+"."+o+"=")
			}
		}
		return out
	case "stub":
		return stepNames(flow, false)
	case "param", "p":
		var out []string
		if flow != nil {
			for _, p := range flow.Spec().Params {
				out = append(out, p.Name+"=")
			}
		}
		return out
	case "as":
		return []string{"job", "jobset"}
	case "format", "f":
		return []string{"mermaid", "dot"}
	case "on-interrupt":
		return []string{interruptStop, interruptLeave}
	case "dry-run":
		return []string{"server"}
	}
	return nil
}

// stepNames are the flow's steps, in its order; with run, only Run steps.
func stepNames(flow *sdk.Flow, run bool) []string {
	if flow == nil {
		return nil
	}
	var out []string
	for _, d := range flow.Spec().Steps {
		if !run || d.Spec.Run != nil {
			out = append(out, d.Name)
		}
	}
	return out
}

// runIDs are the IDs of the flow's runs recorded here, newest first, then
// runid.Latest, which names the newest, when there is one.
func runIDs(flow *sdk.Flow) []string {
	runs, err := record.List(record.DefaultRoot)
	if err != nil {
		return nil
	}
	var out []string
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Flow == flowName(flow) {
			out = append(out, runs[i].ID)
		}
	}
	if len(out) > 0 {
		out = append(out, runid.Latest)
	}
	return out
}

// complete prints the candidates of a completion request, args ending in the
// word being completed and completionFlag.
func complete(app *ucli.App, flow *sdk.Flow, args []string, w io.Writer) {
	words := args[:len(args)-1]
	cur := ""
	if len(words) > 1 {
		words, cur = words[:len(words)-1], words[len(words)-1]
	}
	for _, c := range completions(app, flow, words, cur) {
		fmt.Fprintln(w, c)
	}
}
