//go:build unix

package local

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// newGroup makes the process cmd starts the leader of a process group of its own,
// which holds everything it starts.
func newGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends sig to the process group that pid leads.
func signalGroup(pid int, kill bool) {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-pid, sig)
}

// tryLock takes f's lock, exclusive or shared, without waiting; errBusy says
// another process holds it. The lock goes with the process, however it ends.
func tryLock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errBusy
	}
	return err
}
