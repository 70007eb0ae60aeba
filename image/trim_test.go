//go:build unix

package image

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestTrimSlots: the cache keeps the builds used last, and one a build holds.
func TestTrimSlots(t *testing.T) {
	dir := t.TempDir()
	base := time.Now().Add(-time.Hour)
	for i, name := range []string{"a", "b", "c", "d", "e", "f"} {
		lock := filepath.Join(dir, name, "lock")
		if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lock, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		used := base.Add(time.Duration(i) * time.Minute) // a oldest, f newest
		if err := os.Chtimes(lock, used, used); err != nil {
			t.Fatal(err)
		}
	}
	unlock, err := lockFile(filepath.Join(dir, "a", "lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	trimSlots(dir, 4)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"a", "c", "d", "e", "f"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v: the 4 used last and the one held", left, want)
	}
}
