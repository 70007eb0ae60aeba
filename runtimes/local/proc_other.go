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
