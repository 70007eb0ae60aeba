// Package atomicfile writes files so that a reader sees the old content or the new,
// never part of either, even when the writer is killed half-way: the data goes to a
// temporary file in the same directory, which is then renamed into place.
package atomicfile

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// tempSuffix ends the name of every temporary file; with the leading dot it marks
// what a killed writer may leave behind (see RemoveTemps).
const tempSuffix = ".tmp"

// Write writes data to path through a temporary file renamed into place. A file
// it replaces keeps its mode; a new one gets the mode os.Create gives (0666
// less the umask). It survives a killed writer, not a power loss: see WriteSync.
func Write(path string, data []byte) error { return write(path, data, false) }

// WriteSync is Write with the data flushed to the disk before the rename, so the
// file also survives a crash of the machine.
func WriteSync(path string, data []byte) error { return write(path, data, true) }

func write(path string, data []byte, sync bool) error {
	tmp, err := writeTemp(path, data, sync)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	return os.Rename(tmp, path)
}

// writeTemp writes data to a new temporary file beside path, with the mode path
// is to have (flushed to the disk when sync is set), and returns its name; on
// an error it leaves no file.
func writeTemp(path string, data []byte, sync bool) (string, error) {
	tmp, err := createTemp(path)
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(data)
	if err == nil && sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}

// createTemp makes a new temporary file beside path with the mode path is to
// have: the mode of the file it replaces, else the one os.Create gives a new
// file (0666 less the umask, which the system applies as it creates the file,
// so the umask is never read or changed).
func createTemp(path string) (*os.File, error) {
	dir, base := filepath.Split(path)
	var tmp *os.File
	var err error
	for range 10000 {
		name := filepath.Join(dir, "."+base+"."+strconv.FormatUint(uint64(rand.Uint32()), 10)+tempSuffix)
		tmp, err = os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
		if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return nil, err
		}
	}
	return tmp, nil
}

// Batch writes files all or nothing, as far as a writer can, one at a time:
// Create gives each file's temporary file, which the caller writes as its data
// is made, so the data need never be whole; Commit
// renames them all into place only when all are written; Abort removes them,
// leaving every path as it was. The zero Batch is empty.
type Batch struct {
	temps map[string]string // path → its temporary file
	order []string
}

// Create makes a temporary file beside path, for the caller to write and close
// before Commit renames it into place. A second Create of one path replaces the
// first.
func (b *Batch) Create(path string) (*os.File, error) {
	tmp, err := createTemp(path)
	if err != nil {
		return nil, err
	}
	b.put(path, tmp.Name())
	return tmp, nil
}

// put makes tmp the temporary file of path, removing the one it replaces.
func (b *Batch) put(path, tmp string) {
	if b.temps == nil {
		b.temps = map[string]string{}
	}
	if old, ok := b.temps[path]; ok {
		os.Remove(old)
	} else {
		b.order = append(b.order, path)
	}
	b.temps[path] = tmp
}

// Join moves the files of other into b, after b's own, as if each had been added
// to b (a path b has already is replaced); other is left empty.
func (b *Batch) Join(other *Batch) {
	for _, path := range other.order {
		b.put(path, other.temps[path])
	}
	other.temps, other.order = nil, nil
}

// Paths returns the paths added, in the order first added.
func (b *Batch) Paths() []string { return append([]string(nil), b.order...) }

// Commit renames every temporary file into place. On an error the files not yet
// renamed are removed.
func (b *Batch) Commit() error {
	defer b.Abort()
	for _, path := range b.order {
		if err := os.Rename(b.temps[path], path); err != nil {
			return err
		}
		delete(b.temps, path)
	}
	return nil
}

// Abort removes the temporary files not yet renamed.
func (b *Batch) Abort() {
	for _, tmp := range b.temps {
		os.Remove(tmp)
	}
	b.temps, b.order = nil, nil
}

// IsTemp reports whether a file name is one of Write's temporary files.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, tempSuffix)
}

// RemoveTemps removes the temporary files that writers killed during Write left in
// dir (not in its subdirectories), and returns how many it removed. A directory
// that does not exist holds none.
func RemoveTemps(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		if e.Type().IsRegular() && IsTemp(e.Name()) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !os.IsNotExist(err) {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// RemoveStale removes the temporary files of path (those Create and Write make
// beside it) last written more than age ago: what a writer killed before its
// rename left. A writer still at work keeps writing its file, so a short age
// leaves its file alone. It returns the names of the files removed.
func RemoveStale(path string, age time.Duration) ([]string, error) {
	stale, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+escapeGlob(filepath.Base(path))+".*"+tempSuffix))
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, tmp := range stale {
		fi, err := os.Lstat(tmp)
		if err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < age {
			continue
		}
		if err := os.Remove(tmp); err != nil && !os.IsNotExist(err) {
			return removed, err
		}
		removed = append(removed, tmp)
	}
	return removed, nil
}

// escapeGlob quotes the characters filepath.Match reads as a pattern.
func escapeGlob(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
