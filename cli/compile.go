package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/sdk"
)

func compileCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "compile",
		Usage: "write the flow for an orchestrator",
		Description: "Compiles the flow and writes the target's files to standard output, or into DIR with -o DIR.\n" +
			"Nothing is written unless the whole flow compiles.",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Aliases: []string{"t"}, Value: "job", Usage: "what to emit: " + strings.Join(targetNames(), ", ") + ", or all"},
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "write files into `DIR`; - for standard output"},
		}, flowFlags()...),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			chosen, err := chooseTargets(c.String("target"))
			if err != nil {
				return err
			}
			dir := c.String("output")
			if dir == "" {
				return usageErr("--output \"\": give a directory, or - for standard output")
			}
			p, err := load(c, flow)
			if err != nil {
				return err
			}
			var files []emit.File
			for _, t := range chosen {
				out, errs := t.Emit(p)
				if len(errs) > 0 {
					printErrors(c.App.ErrWriter, p.Name, errs)
					return silentInvalid
				}
				files = append(files, out...)
			}
			if dir != "-" {
				return writeFiles(c, dir, files)
			}
			for i, f := range files {
				if len(files) > 1 {
					if i > 0 {
						fmt.Fprintln(c.App.Writer)
					}
					fmt.Fprintf(c.App.Writer, "# file: %s\n", f.Name)
				}
				if _, err := c.App.Writer.Write(f.Data); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func chooseTargets(name string) ([]emit.Target, error) {
	if name == "all" {
		return targets, nil
	}
	for _, t := range targets {
		if t.Name() == name {
			return []emit.Target{t}, nil
		}
	}
	return nil, usageErr("--target %q: choose one of %s, or all", name, strings.Join(targetNames(), ", "))
}

// writeFiles writes every file into dir, each through a temporary file renamed into
// place, so a reader never sees a half-written file.
func writeFiles(c *ucli.Context, dir string, files []emit.File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return invalidErr(err)
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if err := atomicfile.Write(path, f.Data); err != nil {
			return invalidErr(err)
		}
		fmt.Fprintf(c.App.Writer, "wrote %s\n", path)
	}
	return nil
}
