package local

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/manifoldflow/manifold/plan"
)

// stopOrphans kills what an earlier runner of the run in dir left running: a
// step's processes die with their runner (internal/deathsig), but what they
// started outlives them. Such a process has the run directory in its
// environment (plan.EnvRunDir), as every process of a step has; while this
// runner holds the run's lock no other runner's step has it. It returns the
// processes it killed, once they are gone (or after a few seconds).
func stopOrphans(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mark := []byte(plan.EnvRunDir + "=" + dir)
	self := os.Getpid()
	var killed []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue // gone, or another user's
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, mark) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					killed = append(killed, pid)
				}
				break
			}
		}
	}
	for _, pid := range killed {
		for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}
	return killed
}

// alive reports whether process pid runs; a zombie does not.
func alive(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || (data[i+2] != 'Z' && data[i+2] != 'X')
}
