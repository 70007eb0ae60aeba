package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPagesCurrent fails while a generated reference page differs from what
// the code gives now.
func TestPagesCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p.Path)))
		if err != nil {
			t.Errorf("%s: %v; run `make docs` (go run ./tools/docgen) to write it", p.Path, err)
			continue
		}
		if string(got) != string(p.Content) {
			t.Errorf("%s is stale: run `make docs` (go run ./tools/docgen) and commit it (-want +got):\n%s", p.Path, cmp.Diff(string(p.Content), string(got)))
		}
	}
}
