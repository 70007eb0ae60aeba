//go:build linux

package deathsig_test

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/internal/deathsig"
)

// TestChildDiesWithParent starts, through a parent process that uses Start, a
// child that would sleep for a minute, kills the parent with SIGKILL, and sees
// the child gone.
func TestChildDiesWithParent(t *testing.T) {
	if os.Getenv("DEATHSIG_PARENT") == "1" {
		cmd := exec.Command("sleep", "60")
		if err := deathsig.Start(cmd); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestChildDiesWithParent$")
	parent.Env = append(os.Environ(), "DEATHSIG_PARENT=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatalf("reading the child's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("the parent printed %q, not a pid", buf[:n])
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the child %d does not run before its parent is killed: %v", pid, err)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return // gone, or a zombie waiting for init to reap it
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d still runs 10s after its parent was killed", pid)
		}
	}
}
