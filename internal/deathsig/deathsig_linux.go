package deathsig

import (
	"os/exec"
	"runtime"
	"syscall"
)

// starts carries the starts to one goroutine locked to its OS thread. Linux
// sends a child's Pdeathsig when the thread that started it ends, not the
// process; a thread that lives as long as the process makes the signal mean
// "the parent died".
var starts = make(chan startRequest)

type startRequest struct {
	cmd *exec.Cmd
	err chan error
}

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: the thread lives as long as the process
		for r := range starts {
			r.err <- r.cmd.Start()
		}
	}()
}

// Start starts cmd (keeping the SysProcAttr it has) so that it gets SIGKILL
// when this process dies.
func Start(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	r := startRequest{cmd: cmd, err: make(chan error)}
	starts <- r
	return <-r.err
}
