package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
// names and lines). With CGO_ENABLED=0 the binary is static. They are the one
// place the image's build flags are written.
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
	// CacheDir, when set, is where the program is built, one directory per
	// package and platform (CacheDir/build/…), and kept between builds: go build
	// leaves a program that is up to date as it is, so that building an unchanged
	// program again links nothing. Compile hands out a copy (a hard link where it
	// can) that later builds do not change. See DefaultCacheDir.
	CacheDir string
	// Progress, when set, is told how the compiling goes: each time go build
	// compiles a package (go build -v names each on its standard error), with
	// the number compiled so far and the number of packages in the program (go
	// list -deps, counted when the first is compiled; never less than the
	// number compiled). A build that compiles nothing, as an unchanged
	// program's, never calls it.
	Progress func(compiled, total int)
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
	cmd, err := g.command(ctx, linuxEnv(DefaultPlatform), "list", "-find", "-f", "{{.Name}}\t{{.ImportPath}}\t{{.Dir}}")
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
	name := "flow-" + strings.ReplaceAll(p.String(), "/", "-")
	out := filepath.Join(dir, name)
	if g.CacheDir == "" {
		return out, g.build(ctx, p, out)
	}
	slot, err := g.slot(p)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(slot, 0o755); err != nil {
		return "", err
	}
	lock := filepath.Join(slot, "lock")
	unlock, err := lockFile(lock)
	if err != nil {
		return "", err
	}
	defer unlock()
	now := time.Now()
	_ = os.Chtimes(lock, now, now) // the newest used, for trimSlots
	trimSlots(filepath.Dir(slot), cachedBuilds)
	cached := filepath.Join(slot, name)
	if err := g.build(ctx, p, cached); err != nil {
		return "", err
	}
	// go build replaces a program it links rather than writing into it, so a
	// hard link keeps this build's program whatever later builds do.
	if err := os.Link(cached, out); err != nil {
		if err := copyFile(cached, out); err != nil {
			return "", err
		}
	}
	return out, nil
}

// build runs go build for p, writing the program to out.
func (g *GoBuild) build(ctx context.Context, p v1.Platform, out string) error {
	args := []string{"build"}
	if g.Progress != nil {
		args = append(args, "-v")
	}
	args = append(append(args, GoBuildFlags...), "-o", out)
	cmd, err := g.command(ctx, linuxEnv(p), args...)
	if err != nil {
		return err
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if g.Progress != nil {
		counter := &packageCounter{output: &output, progress: g.Progress, total: func() int { return g.countPackages(ctx, p) }}
		defer counter.flush()
		// One writer for both streams, so that the go command's output comes
		// through one pipe, in order.
		cmd.Stdout, cmd.Stderr = counter, counter
	}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errorf(ErrBuild, "the flow program does not build for %s (go build %s): %s: fix it and build again", p, g.Package, firstLines(output.String(), err))
	}
	return nil
}

// countPackages returns the number of packages of the program for p, as go list
// -deps names them, or 0 when it cannot tell.
func (g *GoBuild) countPackages(ctx context.Context, p v1.Platform) int {
	var tags []string
	for _, f := range GoBuildFlags {
		if strings.HasPrefix(f, "-tags=") {
			tags = append(tags, f)
		}
	}
	cmd, err := g.command(ctx, linuxEnv(p), append([]string{"list", "-deps"}, tags...)...)
	if err != nil {
		return 0
	}
	out, err := cmd.Output()
	if err != nil {
		return 0
	}
	return bytes.Count(out, []byte("\n"))
}

// A packageCounter reads the output of go build -v: it counts the lines that
// name a package, telling progress, and keeps every other line in output, for
// errors. At the first package it counts the program's packages (total), so
// that a build that compiles nothing never asks; go build goes on meanwhile,
// its output held by the pipe.
type packageCounter struct {
	output   *bytes.Buffer
	progress func(compiled, total int)
	total    func() int

	partial         []byte
	compiled, known int
}

func (c *packageCounter) Write(b []byte) (int, error) {
	c.partial = append(c.partial, b...)
	for {
		i := bytes.IndexByte(c.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := c.partial[:i+1]
		c.partial = c.partial[i+1:]
		if !isImportPath(bytes.TrimSpace(line)) {
			c.output.Write(line)
			continue
		}
		if c.compiled++; c.compiled == 1 {
			c.known = c.total()
		}
		c.progress(c.compiled, max(c.known, c.compiled))
	}
}

// flush keeps what is left of a last line without its newline.
func (c *packageCounter) flush() { c.output.Write(c.partial) }

// isImportPath reports whether line is a line of go build -v: an import path
// alone, with no space or colon as the go command's other lines have.
func isImportPath(line []byte) bool {
	return len(line) > 0 && !bytes.ContainsAny(line, " \t:") && line[0] != '#'
}

// slot returns the cache directory of the builds of the package for p.
func (g *GoBuild) slot(p v1.Platform) (string, error) {
	dir, pkg, err := g.target()
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	h := sha256.New()
	for _, s := range append([]string{g.Go, dir, pkg, p.String()}, GoBuildFlags...) {
		fmt.Fprintf(h, "%s\x00", s)
	}
	return filepath.Join(g.CacheDir, "build", hex.EncodeToString(h.Sum(nil))[:20]), nil
}

// cachedBuilds is how many packages' builds (a program of about the size of
// the flow program for each platform) a cache keeps: those used last.
const cachedBuilds = 4

// trimSlots removes all but the keep last used build directories of dir (by
// their lock file's time), leaving any that a build holds. What it cannot
// remove it leaves: the cache is an optimisation.
func trimSlots(dir string, keep int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type slot struct {
		name string
		used time.Time
	}
	var slots []slot
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(dir, e.Name(), "lock")); err == nil && e.IsDir() {
			slots = append(slots, slot{e.Name(), fi.ModTime()})
		}
	}
	if len(slots) <= keep {
		return
	}
	slices.SortFunc(slots, func(a, b slot) int { return b.used.Compare(a.used) })
	for _, s := range slots[keep:] {
		path := filepath.Join(dir, s.name)
		unlock, err := tryLockFile(filepath.Join(path, "lock"))
		if err != nil {
			continue // in use
		}
		os.RemoveAll(path)
		unlock()
	}
}

// copyTemp copies src to a new temporary file beside dst, with mode 0755, and
// returns it open.
func copyTemp(src, dst string) (*os.File, error) {
	in, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*.tmp")
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(tmp, in)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// copyFile copies src to dst, through a temporary file renamed into place.
func copyFile(src, dst string) error {
	tmp, err := copyTemp(src, dst)
	if err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
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
