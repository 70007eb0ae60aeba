package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// A Compiler builds the flow program for one platform into dir and returns the
// binary's path.
type Compiler interface {
	Compile(ctx context.Context, p v1.Platform, dir string) (string, error)
}

var _ Compiler = (*GoBuild)(nil)

// GoBuildFlags are the flags GoBuild gives `go build`: paths of this machine
// trimmed, no VCS stamp, no symbol table or DWARF (stack traces keep their file
// names and lines). With CGO_ENABLED=0 the binary is static.
//
// The build tags leave out of the program what only a workstation runs:
// manifold_image the commands run --kube, check, image and kind (and the
// client-go clients, kind and image builder they link; see package cli), and
// urfave_cli_no_docs the command line's man-page and Markdown writers. The
// program in the image is then less than half the size and starts in half the
// time; the steps it runs (`step NAME`) are the same.
var GoBuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-tags=" + ImageBuildTags}

// ImageBuildTags are the build tags of the program in an image, comma-separated.
const ImageBuildTags = "manifold_image,urfave_cli_no_docs"

// GoBuild builds a main package with the go command, for Linux, without cgo.
type GoBuild struct {
	// Package is the main package: a directory (absolute, or starting with . or
	// ..), where the go command then runs, so that its module is the one that
	// holds the directory; or an import path, resolved by the go command from Dir.
	Package string
	// Dir is where the go command runs for an import path; empty means the
	// working directory.
	Dir string
	// Go is the go command; empty means go on PATH.
	Go string
}

// target returns where the go command runs and the package it names there.
func (g *GoBuild) target() (dir, pkg string, err error) {
	if filepath.IsAbs(g.Package) || g.Package == "." || g.Package == ".." ||
		strings.HasPrefix(g.Package, "./") || strings.HasPrefix(g.Package, "../") {
		dir, err := filepath.Abs(g.Package)
		return dir, ".", err
	}
	return g.Dir, g.Package, nil
}

func (g *GoBuild) command(ctx context.Context, env []string, args ...string) (*exec.Cmd, error) {
	dir, pkg, err := g.target()
	if err != nil {
		return nil, err
	}
	goCmd := g.Go
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, append(args, pkg)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	return cmd, nil
}

// linuxEnv is the environment of a build for p: no cgo, and every setting of
// the target chosen here rather than inherited from this machine's environment.
func linuxEnv(p v1.Platform) []string {
	env := []string{"CGO_ENABLED=0", "GOOS=" + p.OS, "GOARCH=" + p.Architecture}
	switch p.Architecture {
	case "amd64":
		level := p.Variant
		if level == "" {
			level = "v1"
		}
		env = append(env, "GOAMD64="+level)
	case "arm":
		env = append(env, "GOARM="+strings.TrimPrefix(p.Variant, "v"))
	}
	return env
}

// Check makes sure that the package exists and is a main package, and returns
// its import path and directory.
func (g *GoBuild) Check(ctx context.Context) (importPath, dir string, err error) {
	cmd, err := g.command(ctx, linuxEnv(DefaultPlatform), "list", "-f", "{{.Name}}\t{{.ImportPath}}\t{{.Dir}}")
	if err != nil {
		return "", "", err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		where := cmd.Dir
		if where == "" {
			where, _ = os.Getwd()
		}
		return "", "", errorf(ErrBuild, "cannot find the flow's package %s from %s: %s: run image build inside the flow's module, or pass the directory of its main package with --package DIR", g.Package, where, firstLines(stderr.String(), err))
	}
	fields := strings.Split(strings.TrimSpace(stdout.String()), "\t")
	if len(fields) != 3 {
		return "", "", fmt.Errorf("go list %s: unexpected output %q", g.Package, stdout.String())
	}
	if fields[0] != "main" {
		return "", "", errorf(ErrBuild, "%s is package %s, not a main package: pass the directory of the flow's main package (the one that calls cli.Main) with --package DIR", fields[1], fields[0])
	}
	return fields[1], fields[2], nil
}

// Compile runs `go build` for p and writes the binary into dir.
func (g *GoBuild) Compile(ctx context.Context, p v1.Platform, dir string) (string, error) {
	out := filepath.Join(dir, "flow-"+strings.ReplaceAll(p.String(), "/", "-"))
	args := append([]string{"build"}, GoBuildFlags...)
	args = append(args, "-o", out)
	cmd, err := g.command(ctx, linuxEnv(p), args...)
	if err != nil {
		return "", err
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", errorf(ErrBuild, "the flow program does not build for %s (go build %s): %s: fix it and build again", p, g.Package, firstLines(output.String(), err))
	}
	return out, nil
}

// firstLines returns the first lines of a command's output on one line, or its
// error when it printed nothing.
func firstLines(output string, err error) string {
	var lines []string
	for line := range strings.SplitSeq(strings.TrimSpace(output), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "# ") {
			continue
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.String()
		}
		return err.Error()
	}
	const most = 4
	if len(lines) > most {
		lines = append(lines[:most], fmt.Sprintf("and %d more", len(lines)-most))
	}
	return strings.Join(lines, "; ")
}
