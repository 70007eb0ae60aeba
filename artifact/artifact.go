// Package artifact keeps the artifacts that the steps of a run pass to each other
// (sdk.Context's Put and Get). A Store holds one run's artifacts under keys laid
// out as the local run directory lays out its files:
//
//	<step>/<name>.json            what step put
//	<step>/<index>/<name>.json    what item index of a foreach step put
//
// Dir keeps them in a directory: the local run directory, or a directory of a
// volume every pod mounts. Package artifact/s3store keeps them in S3, under
// s3://bucket/prefix/<flow>/<run id>/. Every store writes atomically: a reader sees
// the whole artifact or none, even when the writer is killed half-way.
package artifact

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// Store keeps one run's artifacts.
type Store interface {
	// Put stores data under key. A reader sees all of data, or what the key held
	// before, never part of either, even if the writer dies half-way.
	Put(ctx context.Context, key string, data []byte) error
	// Get returns what key holds. When it holds nothing, the error wraps
	// fs.ErrNotExist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Location returns where key (an artifact, or a step's directory of them) is
	// kept, for messages and for MANIFOLD_ARTIFACTS: a path or an s3:// URL.
	Location(key string) string
}

// Lister is a Store that can list the artifacts it holds.
type Lister interface {
	// List returns the artifacts directly under key dir (a StepKey), the
	// <name>.json that Key makes, sorted by key; none when dir holds none.
	List(ctx context.Context, dir string) ([]Entry, error)
}

// Entry is an artifact a Store holds.
type Entry struct {
	Key  string
	Size int64
}

// IsArtifact reports whether base, the last element of a key, names an
// artifact: <name>.json, not a writer's temporary file.
func IsArtifact(base string) bool {
	return strings.HasSuffix(base, ".json") && !strings.HasPrefix(base, ".") && len(base) > len(".json")
}

// Key returns the key of artifact name of step, or of item index of a foreach
// step (index is -1 for a step without Foreach): <step>[/<index>]/<name>.json.
func Key(step string, index int, name string) string {
	return path.Join(StepKey(step, index), name+".json")
}

// SplitKey returns the step and the artifact name of key, the key of an
// artifact of a step without Foreach (<step>/<name>.json, as Key writes it);
// ok is false for any other key, such as an item's.
func SplitKey(key string) (step, name string, ok bool) {
	step, file, found := strings.Cut(key, "/")
	name, isJSON := strings.CutSuffix(file, ".json")
	if !found || !isJSON || step == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return step, name, true
}

// StepKey returns the key under which step (item index of a foreach step, or
// -1) keeps its artifacts: <step>[/<index>].
func StepKey(step string, index int) string {
	if index < 0 {
		return step
	}
	return step + "/" + strconv.Itoa(index)
}

// RunLocation returns where run id of flow keeps its artifacts in the flow's
// artifact store whose root is store (an s3:// URL, or a directory):
// <store>/<flow>/<run id>.
func RunLocation(store, flow, id string) string {
	return strings.TrimSuffix(store, "/") + "/" + flow + "/" + id
}

// Dir is a Store in a directory: the run directory. Keys are paths below it. Put
// writes a temporary file in the artifact's directory, flushes it to the disk and
// renames it into place, which is atomic on local file systems and on the NFS
// servers behind ReadWriteMany volumes (EFS, Filestore, Azure Files NFS).
type Dir string

var (
	_ Store  = Dir("")
	_ Lister = Dir("")
)

// Put writes data to the file of key through a temporary file renamed into place.
func (d Dir) Put(_ context.Context, key string, data []byte) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteSync(p, data)
}

// Get reads the file of key, within the directory: no link in it reaches a
// file outside.
func (d Dir) Get(_ context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(filepath.FromSlash(key))
}

// List returns the artifacts in the directory of key dir, within the
// directory, as Get reads them.
func (d Dir) List(_ context.Context, dir string) ([]Entry, error) {
	if err := CheckKey(dir); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(string(d))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	files, err := fs.ReadDir(r.FS(), dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var entries []Entry
	for _, f := range files {
		if !f.Type().IsRegular() || !IsArtifact(f.Name()) {
			continue
		}
		info, err := f.Info()
		if err != nil {
			continue // removed since it was listed
		}
		entries = append(entries, Entry{Key: dir + "/" + f.Name(), Size: info.Size()})
	}
	return entries, nil
}

// Location returns the path of key.
func (d Dir) Location(key string) string {
	if key == "" {
		return string(d)
	}
	return filepath.Join(string(d), filepath.FromSlash(key))
}

func (d Dir) path(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return d.Location(key), nil
}

// CheckKey refuses a key that is not a clean relative path of non-empty elements
// ("a/b.json", never "/a", "a//b", "../a" or "a/./b").
func CheckKey(key string) error {
	if key == "" || !utf8.ValidString(key) || strings.HasPrefix(key, "/") || path.Clean(key) != key || key == "." ||
		strings.HasPrefix(key, "../") || key == ".." {
		return fmt.Errorf("artifact key %q: want a relative path such as step/name.json", key)
	}
	return nil
}

// IsNotExist reports whether err says that an artifact does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
