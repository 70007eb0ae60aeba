//go:build unix

package local

import (
	"os/exec"
	"syscall"
)

// newGroup makes the process cmd starts the leader of a process group of its own,
// which holds everything it starts, and, where the system can (Linux), makes it
// die with the runner: a runner killed without a chance to stop its steps leaves
// none of them running unwatched.
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

// findProgram returns the file that a step's process, with PATH path, runs as
// program (its argv[0]): searchPath.
func findProgram(program, path string) (string, error) { return searchPath(program, path) }
