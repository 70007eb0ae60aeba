//go:build unix

package image

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes the exclusive lock of the file at path, creating it (and its
// directory), and waits for it; the returned function gives it back. The lock
// goes with the process, however it ends. A lock file removed while this
// waited (trimSlots removes a directory with its lock) is made anew.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	return lock(path, 0)
}

// tryLockFile is lockFile without waiting: it fails when another process holds
// the lock.
func tryLockFile(path string) (func(), error) { return lock(path, syscall.LOCK_NB) }

// errRemoved: the lock file was removed while a lock of it was awaited.
var errRemoved = errors.New("lock file removed")

func lock(path string, how int) (func(), error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|how)
			if err != syscall.EINTR {
				break
			}
		}
		if err == nil {
			err = sameFile(f, path)
		}
		if err == errRemoved {
			f.Close()
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			f.Close()
			return nil, err
		}
		return func() { f.Close() }, nil
	}
}

// sameFile says errRemoved when path is no longer f.
func sameFile(f *os.File, path string) error {
	held, err := f.Stat()
	if err != nil {
		return err
	}
	now, err := os.Stat(path)
	if err != nil || !os.SameFile(held, now) {
		return errRemoved
	}
	return nil
}
