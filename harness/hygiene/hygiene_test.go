// Package hygiene checks what the repository holds: sources, not build outputs.
// Every clone downloads every tracked file, so a program built at the root by
// `go build ./tools/sim` and committed by mistake costs every user its size.
package hygiene

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const root = "../.."

// maxTracked bounds a tracked file's size; the largest sources (kind's JobSet
// manifests) are under a megabyte.
const maxTracked = 4 << 20

// magics are the openings of compiled programs and archives.
var magics = [][]byte{
	[]byte("\x7fELF"),        // Linux, BSD
	{0xcf, 0xfa, 0xed, 0xfe}, // Mach-O, 64-bit
	{0xce, 0xfa, 0xed, 0xfe}, // Mach-O, 32-bit
	{0xca, 0xfe, 0xba, 0xbe}, // Mach-O universal
	[]byte("MZ"),             // Windows PE
	[]byte("!<arch>\n"),      // ar archives (Go's .a)
	[]byte("\x00asm"),        // WebAssembly
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v (these checks read the repository's git index; run them in a clone)", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestNoBuildOutputsTracked fails on a tracked file that is a compiled program
// or an archive, or too large to be a source.
func TestNoBuildOutputsTracked(t *testing.T) {
	files := strings.Split(strings.TrimRight(git(t, "ls-files", "-z"), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files; want the whole repository", len(files))
	}
	for _, f := range files {
		path := filepath.Join(root, f)
		info, err := os.Lstat(path)
		if err != nil {
			continue // deleted in the work tree, not yet committed
		}
		if !info.Mode().IsRegular() {
			continue
		}
		if info.Size() > maxTracked {
			t.Errorf("%s is tracked and holds %d bytes: a build output or data file does not belong in the repository (git rm --cached %s)", f, info.Size(), f)
			continue
		}
		head := make([]byte, 8)
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := fh.Read(head)
		fh.Close()
		for _, m := range magics {
			if bytes.HasPrefix(head[:n], m) {
				t.Errorf("%s is tracked and is a compiled program or archive: remove it (git rm --cached %s) and build it instead", f, f)
			}
		}
	}
}

// TestProgramsIgnored checks that the program `go build` makes of each main
// package, at the repository's root or in the package's own directory, is
// ignored by git, so that it cannot be committed with `git add .`.
func TestProgramsIgnored(t *testing.T) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			if dir := filepath.Dir(path); !slices.Contains(dirs, dir) {
				dirs = append(dirs, dir)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 5 {
		t.Fatalf("found %d main packages; want every example and tool", len(dirs))
	}
	for _, dir := range dirs {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(dir)
		for _, out := range []string{name, filepath.ToSlash(filepath.Join(rel, name))} {
			cmd := exec.Command("git", "check-ignore", "-q", "--no-index", out)
			cmd.Dir = root
			if err := cmd.Run(); err != nil {
				t.Errorf("`go build ./%s` writes %s, which git does not ignore: add /%s to .gitignore", rel, out, out)
			}
		}
	}
}
