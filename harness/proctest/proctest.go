// Package proctest tells tests whether a process still runs, and when a kill
// loop kills one.
package proctest

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Alive reports whether process pid runs. A zombie does not: once killed, a
// process reparented to an init that does not reap it stays one.
func Alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		// No /proc entry: gone, or a system without /proc.
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name, which is in parentheses.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// WaitGone waits up to timeout for process pid to end, and says so if it does not.
func WaitGone(pid int, timeout time.Duration) error {
	for deadline := time.Now().Add(timeout); Alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d still runs after %s", pid, timeout)
		}
	}
	return nil
}
