//go:build unix

package image

import (
	"os"
	"syscall"
)

// lockFile takes the exclusive lock of the file at path, creating it, and waits
// for it; the returned function gives it back. The lock goes with the process,
// however it ends.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
