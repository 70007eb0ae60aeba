package artifact_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/artifact"
)

// TestDirStaysWithin: a link in a Dir store to a file or directory outside it
// is not followed.
func TestDirStaysWithin(t *testing.T) {
	ctx := context.Background()
	const sentinel = "SENTINEL-OUTSIDE-THE-STORE"
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.json"), []byte(`"`+sentinel+`"`), 0o644); err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	if err := os.MkdirAll(filepath.Join(d, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.json"), filepath.Join(d, "a", "x.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(d, "b")); err != nil {
		t.Fatal(err)
	}
	store := artifact.Dir(d)
	for _, key := range []string{"a/x.json", "b/secret.json"} {
		if data, err := store.Get(ctx, key); err == nil || strings.Contains(string(data), sentinel) {
			t.Errorf("Get(%s) = %q, %v: read a file outside the store", key, data, err)
		}
	}
	if entries, err := store.List(ctx, "b"); err == nil || len(entries) > 0 {
		t.Errorf("List(b) = %v, %v: listed a directory outside the store", entries, err)
	}
}
