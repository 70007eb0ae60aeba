package simcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/manifoldflow/manifold/internal/deathsig"
)

// process is one program the cluster started, with its log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // exit status, valid once done is closed
	// bin, args and env are what it was started with, for a restart (again).
	bin  string
	args []string
	env  []string
}

// start runs bin with args, its output going to dir/logs/name.log.
func start(dir, name, bin string, args, env []string) (*process, error) {
	return spawn(dir, name, bin, args, env, os.O_TRUNC)
}

// again starts a stopped process p anew, with the same program, arguments and
// environment, appending to its log.
func (p *process) again() (*process, error) {
	return spawn(p.cmd.Dir, p.name, p.bin, p.args, p.env, os.O_APPEND)
}

// spawn starts bin with args, its output going to dir/logs/name.log, opened with
// mode (os.O_TRUNC or os.O_APPEND).
func spawn(dir, name, bin string, args, env []string, mode int) (*process, error) {
	logPath := filepath.Join(dir, "logs", name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|mode, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own copy of the descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	// No program outlives the test binary, even when cleanup never runs (a
	// test timeout, a crash).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := deathsig.Start(cmd); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{}), bin: bin, args: args, env: env}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited returns an error if p has already stopped.
func (p *process) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s exited (%v); see %s", p.name, p.err, p.log)
	default:
		return nil
	}
}

// stop sends SIGTERM to p's pid, and SIGKILL if it has not exited after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// CPU returns the processor time (user and system) that the cluster's running
// process called name (etcd, kube-apiserver, workflow-controller, ...) has used
// so far, read from /proc.
func (c *Cluster) CPU(name string) (time.Duration, error) {
	procs := c.processes()
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if p.name != name || p.cmd.Process == nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		if err != nil {
			return 0, err
		}
		// The fields after the command's name, which is in parentheses:
		// state is the third field, utime and stime the 14th and 15th.
		_, rest, ok := strings.Cut(string(data), ") ")
		fields := strings.Fields(rest)
		if !ok || len(fields) < 13 {
			return 0, fmt.Errorf("/proc/%d/stat: %q", p.cmd.Process.Pid, data)
		}
		var ticks int64
		for _, f := range fields[11:13] {
			n, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				return 0, err
			}
			ticks += n
		}
		return time.Duration(ticks) * time.Second / clockTicks, nil
	}
	return 0, fmt.Errorf("no process %s", name)
}

// clockTicks is the unit of /proc's times, USER_HZ: 100 on every Linux
// architecture Go supports.
const clockTicks = 100
