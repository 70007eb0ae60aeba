//go:build unix

package record

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's lock, exclusive or shared, without waiting; ErrBusy says
// another process holds it. The lock goes with the process, however it ends.
func tryLock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return ErrBusy
	}
	return err
}
