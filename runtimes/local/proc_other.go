//go:build !unix

package local

import (
	"os"
	"os/exec"
)

// Without process groups, a step's own process is all the runner stops.

func newGroup(*exec.Cmd) {}

func signalGroup(pid int, _ bool) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// findProgram returns the file that a step's process runs as program (its
// argv[0]), found as exec.LookPath finds it, in this process's PATH.
func findProgram(program, _ string) (string, error) { return exec.LookPath(program) }
