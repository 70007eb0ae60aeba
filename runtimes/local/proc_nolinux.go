//go:build !linux

package local

import "os/exec"

// Elsewhere than on Linux, a step's processes do not die with a runner that is
// killed, and a resumed run cannot tell which processes an earlier runner left.

func start(cmd *exec.Cmd) error { return cmd.Start() }

func stopOrphans(string) []int { return nil }
