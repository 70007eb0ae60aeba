package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	ucli "github.com/urfave/cli/v2"
)

// manifoldModule is the module path of manifold, which a flow program
// outside it requires.
const manifoldModule = "github.com/manifoldflow/manifold"

// Version is what --version and the version command print of the program:
// its module, the manifold it was built with, the Go toolchain and platform,
// and the version control state of its build when Go recorded one.
type Version struct {
	// Program is the program's name, the flow's.
	Program string `json:"program"`
	// Module and ModuleVersion are the main module's path and version:
	// (devel) for a build of a working tree, a pseudo-version or tag for
	// go install of a version.
	Module        string `json:"module"`
	ModuleVersion string `json:"moduleVersion"`
	// Manifold is the version of manifold the program was built with: its
	// own when it is the main module, else the required one (with what
	// replaces it, after "=>").
	Manifold string `json:"manifold"`
	// Go is the toolchain that built the program, Platform its GOOS/GOARCH.
	Go       string `json:"go"`
	Platform string `json:"platform"`
	// Revision, Time and Modified are the version control state of the
	// build (vcs.revision, vcs.time, vcs.modified), when Go recorded one.
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified *bool  `json:"modified,omitempty"`
}

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// programVersion returns the Version of program from Go's build info.
func programVersion(program string) Version {
	v := Version{Program: program, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Module: "unknown", ModuleVersion: "unknown", Manifold: "unknown"}
	info, ok := readBuildInfo()
	if !ok {
		return v
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	v.Module, v.ModuleVersion = info.Main.Path, info.Main.Version
	if info.Main.Path == manifoldModule {
		v.Manifold = info.Main.Version
	}
	for _, d := range info.Deps {
		if d.Path != manifoldModule {
			continue
		}
		v.Manifold = d.Version
		if r := d.Replace; r != nil {
			v.Manifold += " => " + r.Path
			if r.Version != "" {
				v.Manifold += " " + r.Version
			}
		}
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			v.Modified = &m
		}
	}
	return v
}

// write prints v as "key value" lines, as `go version -m` does.
func (v Version) write(w io.Writer) error {
	fmt.Fprintf(w, "%s %s\n", v.Program, v.ModuleVersion)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  module\t%s %s\n", v.Module, v.ModuleVersion)
	fmt.Fprintf(tw, "  manifold\t%s\n", v.Manifold)
	fmt.Fprintf(tw, "  go\t%s %s\n", v.Go, v.Platform)
	if v.Revision != "" {
		fmt.Fprintf(tw, "  revision\t%s\n", v.Revision)
	}
	if v.Time != "" {
		fmt.Fprintf(tw, "  time\t%s\n", v.Time)
	}
	if v.Modified != nil {
		fmt.Fprintf(tw, "  modified\t%t\n", *v.Modified)
	}
	return tw.Flush()
}

// versionFlag is the app's --version.
func versionFlag() ucli.Flag {
	return &ucli.BoolFlag{Name: "version", Usage: "print the program's version and build info, and exit (see the version command)"}
}

// versionCommand prints the program's version and build info.
func versionCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print the program's version and build info: its module, manifold's version, Go, VCS state",
		Description: "Prints what Go recorded in this program when it was built: the main module and its version\n" +
			"((devel) for a build of a working tree), the manifold version it requires, the Go toolchain\n" +
			"and platform, and the commit, its time and whether the tree was modified, when known.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "print a `FORMAT`: text or json"},
		},
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			v := programVersion(c.App.Name)
			switch o := c.String("output"); o {
			case "text":
				return v.write(c.App.Writer)
			case "json":
				enc := json.NewEncoder(c.App.Writer)
				enc.SetIndent("", "  ")
				return enc.Encode(v)
			default:
				return usageErr("--output %q: choose text or json", o)
			}
		},
	}
}
