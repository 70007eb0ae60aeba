package record

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ErrBusy is what Lock returns when another process holds the run directory's lock.
var ErrBusy = errors.New("another runner holds the run directory's lock")

// Lock takes the lock of run directory dir, which must exist, for this process,
// without waiting; it returns ErrBusy when another process holds it. The lock is
// held until the Closer is closed or the process ends, however it ends; while it
// is held, a run recorded as running does not read as abandoned.
func Lock(dir string) (io.Closer, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f, true); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// locked reports whether a runner holds dir's lock.
func locked(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	return errors.Is(tryLock(f, false), ErrBusy)
}

// Open makes the directory of run id under root and takes its lock (see Lock),
// saying what to do when another runner holds it. It returns the run's directory.
func Open(root, id string) (string, io.Closer, error) {
	dir := filepath.Join(root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	lk, err := Lock(dir)
	if errors.Is(err, ErrBusy) {
		return "", nil, fmt.Errorf("run %s is in progress in another process: wait for it, or start a new run without --run-id", id)
	}
	if err != nil {
		return "", nil, err
	}
	return dir, lk, nil
}
