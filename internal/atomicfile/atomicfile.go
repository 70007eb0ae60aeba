// Package atomicfile writes files so that a reader sees the old content or the new,
// never part of either, even when the writer is killed half-way: the data goes to a
// temporary file in the same directory, which is then renamed into place.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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

// tempPattern is os.CreateTemp's pattern of the temporary files of path.
func tempPattern(path string) string { return "." + filepath.Base(path) + ".*" + tempSuffix }

// Batch writes files all or nothing, as far as a writer can, one at a time:
// Create gives each file's temporary file, which the caller writes as its data
// is made, so the data need never be whole; Remove names a file to remove with
// them; Commit renames them all into place and removes those named only when
// all are written, and puts every file back as it was if one of them fails;
// Abort removes the temporary files, leaving every path as it was. The zero
// Batch is empty.
type Batch struct {
	temps   map[string]string // path → its temporary file
	order   []string
	removes []string
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

// Remove names a file that Commit removes, with the renames: a path that is
// not there when Commit runs is left so.
func (b *Batch) Remove(path string) { b.removes = append(b.removes, path) }

// Commit renames every temporary file into place and removes the files Remove
// named, all or nothing: first it keeps each file that is there (a hard link
// to it under a temporary name, or where the file system has none, the file
// itself renamed there), then it renames and removes; if any of these fails,
// it puts back every file it kept and removes those it put where none was, so
// that every path is as it was, and returns the error, saying so. Each file
// is the old or the new one whenever it is read (but for a file renamed to be
// kept, which is missing until its new one is renamed in), and a reader of
// several sees them change one after another, not at once (a directory's
// entries cannot be changed at once). A writer killed during Commit leaves some
// files changed and others not, and the kept ones under temporary names,
// which RemoveStale removes.
func (b *Batch) Commit() error {
	defer b.Abort()
	kept := map[string]string{} // path → the file it held, kept
	var done []string           // paths renamed into or removed
	undo := func(err error) error {
		var errs []error
		for _, path := range done {
			if _, ok := kept[path]; !ok {
				if rerr := os.Remove(path); rerr != nil && !os.IsNotExist(rerr) {
					errs = append(errs, rerr)
				}
			}
		}
		for path, k := range kept {
			if rerr := os.Rename(k, path); rerr != nil {
				errs = append(errs, fmt.Errorf("%s is left as %s: %w", path, k, rerr))
				continue
			}
			// A link to the file still at path is not renamed but left.
			os.Remove(k)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w; and putting the files back as they were failed: %w", err, errors.Join(errs...))
		}
		return fmt.Errorf("%w; every file is as it was", err)
	}
	for _, path := range slices.Concat(b.order, b.removes) {
		if _, ok := kept[path]; ok {
			continue
		}
		k, err := keep(path)
		if err != nil {
			return undo(err)
		}
		if k != "" {
			kept[path] = k
		}
	}
	for _, path := range b.order {
		if err := rename(b.temps[path], path); err != nil {
			return undo(err)
		}
		delete(b.temps, path)
		done = append(done, path)
	}
	for _, path := range b.removes {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return undo(err)
		}
		done = append(done, path)
	}
	for _, k := range kept {
		os.Remove(k)
	}
	return nil
}

// keep keeps the file at path under a new temporary name beside it, and
// returns that name: a hard link to the file, or the file itself renamed
// there where no hard link can be made. It returns "" when there is no file
// at path, and an error when path is a directory or anything else but a file.
func keep(path string) (string, error) {
	fi, err := os.Lstat(path)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return "", fmt.Errorf("%s is a directory, where a file is to be written", path)
	}
	if !fi.Mode().IsRegular() && fi.Mode()&fs.ModeSymlink == 0 {
		return "", fmt.Errorf("%s is not a regular file (%v), where a file is to be written", path, fi.Mode().Type())
	}
	// A fresh name, of the temporary files' form, for the link.
	tmp, err := os.CreateTemp(filepath.Dir(path), tempPattern(path))
	if err != nil {
		return "", err
	}
	name := tmp.Name()
	tmp.Close()
	if err := os.Remove(name); err != nil {
		return "", err
	}
	if err := link(path, name); err == nil {
		return name, nil
	}
	if err := os.Rename(path, name); err != nil {
		return "", err
	}
	return name, nil
}

// Abort removes the temporary files not yet renamed.
func (b *Batch) Abort() {
	for _, tmp := range b.temps {
		os.Remove(tmp)
	}
	b.temps, b.order, b.removes = nil, nil, nil
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

// rename and link are os.Rename and os.Link, which tests replace to make them
// fail.
var (
	rename = os.Rename
	link   = os.Link
)
