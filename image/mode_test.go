//go:build unix

package image

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// TestWrittenModes: the tarball and the layer cache's files get the mode the
// umask gives a new file, and a tarball replaced keeps its mode.
func TestWrittenModes(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	modeOf := func(path string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	refs := map[name.Reference]v1.Image{name.MustParseReference("registry.example.com/x:v1"): empty.Image}
	dir := t.TempDir()
	fresh, kept := filepath.Join(dir, "new.tar"), filepath.Join(dir, "kept.tar")
	if err := os.WriteFile(kept, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{fresh: 0o640, kept: 0o600} {
		if err := writeTarball(path, refs); err != nil {
			t.Fatal(err)
		}
		if got := modeOf(path); got != want {
			t.Errorf("tarball %s: mode %03o, want %03o", filepath.Base(path), got, want)
		}
	}

	cache := t.TempDir()
	_, _, err := cachedLayer(cache, "k", func(w io.Writer) (*storedLayer, error) {
		data := []byte("layer")
		d, n, err := v1.SHA256(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		_, err = w.Write(data)
		return &storedLayer{Digest: d, DiffID: d, Size: n, MediaType: types.DockerLayer}, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"k.tar.gz", "k.json"} {
		if got := modeOf(filepath.Join(cache, name)); got != 0o640 {
			t.Errorf("cached %s: mode %03o, want 0640", name, got)
		}
	}
}
