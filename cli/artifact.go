package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// storeFlags are the flags of the commands that read a past run's artifacts.
func storeFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "store", Usage: "read a cluster run's artifacts from the artifact store at `STORE` (s3://bucket/prefix, or the directory where its volume is mounted here) instead of the one its record names"},
		&ucli.StringFlag{Name: "endpoint", Usage: "reach an s3:// store through the S3-compatible server at `URL` instead of the one the run's record names"},
	}
}

// openClient opens the runs recorded here, with --store and --endpoint.
func openClient(c *ucli.Context) *client.Client {
	var opts []client.Option
	if s := c.String("store"); s != "" {
		opts = append(opts, client.Store(s))
	}
	if e := c.String("endpoint"); e != "" {
		opts = append(opts, client.Endpoint(e))
	}
	return client.Open(record.DefaultRoot, opts...)
}

// args checks that command got between least and most arguments, as usage
// says.
func args(c *ucli.Context, command, usage string, least, most int) error {
	if n := c.NArg(); n < least || n > most {
		return usageErr("%s takes %s, got %d arguments", command, usage, n)
	}
	return nil
}

// indexFlag is --index of a command, -1 when it is not given.
func indexFlag(c *ucli.Context) (int, error) {
	if !c.IsSet("index") {
		return -1, nil
	}
	i := c.Int("index")
	if i < 0 {
		return 0, usageErr("--index %d: a foreach item's index is 0 or more", i)
	}
	return i, nil
}

func artifactCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "artifact",
		Usage: "read an artifact of a past run",
		Subcommands: []*ucli.Command{
			{
				Name:      "get",
				Usage:     "print an artifact a step put, as JSON, or write it to a file",
				ArgsUsage: "RUN STEP NAME",
				Flags: append([]ucli.Flag{
					&ucli.IntFlag{Name: "index", Aliases: []string{"i"}, DefaultText: "none", Usage: "the foreach item `N` of the step whose artifact to read (from 0)"},
					&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the artifact, as stored, to `FILE` (replaced at once) instead of printing it"},
				}, storeFlags()...),
				Action: func(c *ucli.Context) error {
					if err := args(c, "artifact get", "RUN STEP NAME", 3, 3); err != nil {
						return err
					}
					index, err := indexFlag(c)
					if err != nil {
						return err
					}
					run, err := localRun(c, flow, c.Args().Get(0))
					if err != nil {
						return invalidErr(err)
					}
					step := run.Step(c.Args().Get(1))
					task := step.Task()
					if index >= 0 {
						task = step.Item(index)
					}
					var raw json.RawMessage
					if err := task.Artifact(c.Context, c.Args().Get(2), &raw); err != nil {
						return invalidErr(err)
					}
					if out := c.String("output"); out != "" {
						if info, err := os.Stat(filepath.Dir(out)); err != nil || !info.IsDir() {
							return invalidErr(fmt.Errorf("-o %s: no directory %s: make it first", out, filepath.Dir(out)))
						}
						// The file gets the artifact's bytes as stored.
						store, err := run.Store(c.Context)
						if err != nil {
							return invalidErr(err)
						}
						data, err := store.Get(c.Context, artifact.Key(task.Step, taskIndex(task), c.Args().Get(2)))
						if err != nil {
							return invalidErr(err)
						}
						if err := atomicfile.Write(out, data); err != nil {
							return invalidErr(fmt.Errorf("-o %s: %w", out, err))
						}
						return nil
					}
					return writeJSON(c.App.Writer, raw)
				},
			},
		},
	}
}

// writeJSON prints a JSON value indented, ending with a newline.
func writeJSON(w io.Writer, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// showArtifacts lists a run's artifacts: step, foreach item, name and size.
func showArtifacts(c *ucli.Context, run *client.Run) error {
	as, err := run.Artifacts(c.Context)
	if err != nil {
		return invalidErr(err)
	}
	out := c.App.Writer
	fmt.Fprintln(out)
	if len(as) == 0 {
		fmt.Fprintf(out, "no artifacts in %s\n", storeLocation(c, run))
		return nil
	}
	fmt.Fprintf(out, "artifacts in %s:\n", storeLocation(c, run))
	rows := [][]string{{"STEP", "INDEX", "NAME", "SIZE"}}
	for _, a := range as {
		index := ""
		if a.Index >= 0 {
			index = strconv.Itoa(a.Index)
		}
		rows = append(rows, []string{a.Step, index, a.Name, size(a.Size)})
	}
	return writeTable(out, rows)
}

func storeLocation(c *ucli.Context, run *client.Run) string {
	s, err := run.Store(c.Context)
	if err != nil {
		return "?"
	}
	return s.Location("")
}

// size is a number of bytes as people read it: 812 B, 4.2 KiB, 1.5 GiB.
func size(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	f, unit := float64(n)/1024, 0
	for f >= 1024 && unit < 4 {
		f /= 1024
		unit++
	}
	return strconv.FormatFloat(f, 'f', 1, 64) + " " + []string{"KiB", "MiB", "GiB", "TiB", "PiB"}[unit]
}

// taskIndex is a task's foreach index, or -1.
func taskIndex(t *client.Task) int {
	if t.Index == nil {
		return -1
	}
	return *t.Index
}
