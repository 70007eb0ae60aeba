package image

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
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
// place the image's build flags are written: GoBuild.Reuse checks a program's
// build against them too (a build tag goes here as "-tags=NAME").
var GoBuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// GoBuildCommand returns the command line, as a shell takes it, that builds a
// program for p as GoBuild does, and so one that GoBuild.Reuse can reuse.
func GoBuildCommand(p v1.Platform) string {
	words := linuxEnv(p)
	words = append(words, "go", "build")
	for _, f := range GoBuildFlags {
		if strings.ContainsAny(f, " \t'\"$") {
			f = "'" + strings.ReplaceAll(f, "'", `'\''`) + "'"
		}
		words = append(words, f)
	}
	return strings.Join(words, " ")
}

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
	// Reuse, with CacheDir, is a program that may be the very one go build would
	// make, such as the running flow program (os.Executable): when its build
	// info says it was built for the platform with GoBuildFlags, and it is newer
	// than the cached build, it takes the cached build's place before go build
	// runs, and go build keeps it unless the source, the toolchain or the flags
	// differ. Either way the program, and so the image's digest, is what go build
	// makes.
	Reuse string
	// Progress, when set, is told what Compile decided about Reuse.
	Progress func(line string)
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
	seed, err := g.seed(p, cached)
	if err != nil {
		return "", err
	}
	if seed != nil {
		defer seed.Close()
	}
	if err := g.build(ctx, p, cached); err != nil {
		return "", err
	}
	if seed != nil {
		fi, err := os.Stat(cached)
		sfi, serr := seed.Stat()
		if err == nil && serr == nil && os.SameFile(fi, sfi) {
			g.progress("%s: reused this program (%s), built from the same source with the image's flags", p, g.Reuse)
		} else {
			g.progress("%s: this program (%s) is not what go build makes now (the source, toolchain or flags differ): built again", p, g.Reuse)
		}
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
	args := append([]string{"build"}, GoBuildFlags...)
	args = append(args, "-o", out)
	cmd, err := g.command(ctx, linuxEnv(p), args...)
	if err != nil {
		return err
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errorf(ErrBuild, "the flow program does not build for %s (go build %s): %s: fix it and build again", p, g.Package, firstLines(output.String(), err))
	}
	return nil
}

func (g *GoBuild) progress(format string, args ...any) {
	if g.Progress != nil {
		g.Progress(fmt.Sprintf(format, args...))
	}
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

// seed puts Reuse in cached's place when it was built for p with GoBuildFlags
// and is newer than cached (a program older than the last build would only
// undo it), and returns it open, so that Compile can tell whether go build kept
// it; nil when it did not.
func (g *GoBuild) seed(p v1.Platform, cached string) (*os.File, error) {
	if g.Reuse == "" {
		return nil, nil
	}
	rfi, err := os.Stat(g.Reuse)
	if err != nil {
		return nil, nil // nothing to reuse; go build makes the program
	}
	if cfi, err := os.Stat(cached); err == nil && !rfi.ModTime().After(cfi.ModTime()) {
		return nil, nil
	}
	bi, err := buildinfo.ReadFile(g.Reuse)
	if err != nil {
		return nil, nil // not a Go program
	}
	if why := builtFor(bi, p); why != "" {
		g.progress("%s: this program (%s) %s: building it for the image (a program built with `%s` is reused)", p, g.Reuse, why, GoBuildCommand(p))
		return nil, nil
	}
	tmp, err := copyTemp(g.Reuse, cached)
	if err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), cached); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	return tmp, nil
}

// builtFor says how a program with build info bi was not built as GoBuild
// builds for p, from GoBuildFlags and linuxEnv; empty when it was. Some flags
// leave no trace in the build info (-ldflags with -trimpath); go build, which
// relinks a program built otherwise, has the last word on those.
func builtFor(bi *buildinfo.BuildInfo, p v1.Platform) string {
	want := map[string]string{}
	for _, kv := range linuxEnv(p) {
		k, v, _ := strings.Cut(kv, "=")
		want[k] = v
	}
	noVCS, trimpath := false, false
	for _, f := range GoBuildFlags {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			v = "true"
		}
		switch k {
		case "-buildvcs":
			noVCS = v == "false"
		case "-trimpath":
			trimpath = v == "true"
			want[k] = v
		case "-tags":
			want[k] = strings.Join(strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }), ",")
		default:
			want[k] = v
		}
	}
	if trimpath {
		delete(want, "-ldflags") // not recorded: it may hold this machine's paths
	}
	have := map[string]string{}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "-buildmode" && s.Value == "exe", s.Key == "-compiler" && s.Value == "gc":
		case strings.HasPrefix(s.Key, "vcs"):
			if noVCS {
				return "carries version control information (built without -buildvcs=false)"
			}
		case strings.HasPrefix(s.Key, "-") || want[s.Key] != "":
			have[s.Key] = s.Value
		}
	}
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if have[k] != want[k] {
			diffs = append(diffs, setting(k, have[k], want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, setting(k, have[k], ""))
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	return "was built " + strings.Join(diffs, ", ")
}

// setting says how a build setting differs: have is the program's value, want
// the image's, either empty when unset.
func setting(k, have, want string) string {
	if !strings.HasPrefix(k, "-") {
		return fmt.Sprintf("with %s=%s, not %s=%s", k, cmp.Or(have, `""`), k, want)
	}
	flag := func(v string) string {
		if v == "true" {
			return k
		}
		return k + "=" + v
	}
	switch {
	case have == "":
		return "without " + flag(want)
	case want == "":
		return "with " + flag(have)
	}
	return fmt.Sprintf("with %s=%s, not %s", k, have, want)
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
