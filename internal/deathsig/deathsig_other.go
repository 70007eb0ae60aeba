//go:build !linux

package deathsig

import "os/exec"

// Start starts cmd. Elsewhere than on Linux the system cannot tell a child to
// die with its parent.
func Start(cmd *exec.Cmd) error { return cmd.Start() }
