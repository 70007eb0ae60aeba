package proctest

import (
	"os/exec"
	"testing"
	"time"
)

func TestAlive(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) {
		t.Fatal("a sleeping process is not alive")
	}
	if err := WaitGone(pid, 50*time.Millisecond); err == nil {
		t.Error("WaitGone returned while the process runs")
	}
	// Killed but not reaped, it is a zombie: gone for Alive.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := WaitGone(pid, 10*time.Second); err != nil {
		t.Error(err)
	}
	_ = cmd.Wait()
	if Alive(pid) {
		t.Error("a reaped process is alive")
	}
}
