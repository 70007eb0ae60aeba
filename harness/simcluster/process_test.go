package simcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// TestStopByPID: stop ends the process it started, by its pid.
func TestStopByPID(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	p, err := start(t.TempDir(), "sleep", sleep, []string{"600"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	if !alive(pid) || p.exited() != nil {
		t.Fatal("the process did not start")
	}
	p.stop(5 * time.Second)
	if p.exited() == nil {
		t.Error("stop returned before the process exited")
	}
	if alive(pid) {
		t.Errorf("pid %d is still alive after stop", pid)
	}
}

// orphanEnv makes the test binary act as a process that starts a child through
// start and then exits without stopping it, as a test binary does when it
// times out or crashes.
const orphanEnv = "MANIFOLD_SIMCLUSTER_ORPHAN_HELPER"

func orphanHelper() {
	p, err := start(os.Getenv(orphanEnv), "sleep", "/bin/sleep", []string{"600"}, nil)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println(p.cmd.Process.Pid)
	os.Exit(0) // no cleanup
}

// TestChildrenDieWithTheTestBinary: a process started by a test binary that
// then dies (timeout, crash) is killed with it, so no cluster process outlives
// its test.
func TestChildrenDieWithTheTestBinary(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("helper printed %q", out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) && !zombie(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the child (pid %d) outlived the process that started it", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// zombie reports whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true // gone
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// TestRemoveStale: a state directory left by a dead process is removed at the
// next start; one whose owner lives is kept.
func TestRemoveStale(t *testing.T) {
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	dirs := map[int]string{}
	for _, pid := range []int{done.Process.Pid, os.Getpid()} {
		d, err := os.MkdirTemp("", stateDirPrefix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		dirs[pid] = d
	}
	removeStale()
	if _, err := os.Stat(dirs[done.Process.Pid]); !os.IsNotExist(err) {
		t.Errorf("the dead process's directory is still there (%v)", err)
	}
	if _, err := os.Stat(dirs[os.Getpid()]); err != nil {
		t.Errorf("the live process's directory was removed: %v", err)
	}
}
