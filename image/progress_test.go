package image_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/image"
)

// TestGoBuildProgress builds a program whose own package is new (so go build
// compiles it, whatever the Go cache holds) and checks what Progress is told:
// each package compiled, counted up from 1, of the program's packages, which
// are fmt's and its own; then builds it again, unchanged, into the same cache,
// which compiles nothing and tells nothing.
func TestGoBuildProgress(t *testing.T) {
	root := t.TempDir()
	dir := standalone(t, filepath.Join(root, "prog"), "progress "+strconv.FormatInt(time.Now().UnixNano(), 10))
	var mu sync.Mutex
	var calls [][2]int
	gb := &image.GoBuild{Package: dir, CacheDir: filepath.Join(root, "cache"), Progress: func(compiled, total int) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, [2]int{compiled, total})
	}}
	if _, err := gb.Compile(context.Background(), amd64, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("Progress was not called for a build that compiles the program's package")
	}
	// The program holds fmt and what fmt imports, which go list -deps counts:
	// far more than its one package of its own.
	total := calls[0][1]
	for i, c := range calls {
		if c[0] != i+1 || c[1] != total || total < 10 || c[0] > total {
			t.Errorf("call %d: compiled %d of %d; want %d of the program's packages, fmt's and its own", i, c[0], c[1], i+1)
		}
	}

	calls = nil
	if _, err := gb.Compile(context.Background(), amd64, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 0 {
		t.Errorf("an unchanged build told %v", calls)
	}
}

// TestGoBuildProgressErrors: with Progress set, a program that does not build
// still fails with the compiler's own message, not the package lines.
func TestGoBuildProgressErrors(t *testing.T) {
	compiled := 0
	broken := &image.GoBuild{Package: filepath.Join(exampletest.Root(), "image", "testdata", "broken"), Progress: func(n, _ int) { compiled = n }}
	_, err := broken.Compile(context.Background(), amd64, t.TempDir())
	if !errors.Is(err, image.ErrBuild) {
		t.Fatalf("broken program: got %v, want ErrBuild", err)
	}
	checkOneLine(t, err, "main.go:5")
	if compiled == 0 || strings.Contains(err.Error(), "testdata/broken;") {
		t.Errorf("compiled %d packages; error %q: want its package line counted, not in the error", compiled, err)
	}
}
