package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// tailLines is how many of a failed pod's last log lines its failure shows,
// and tailLineMax how many bytes of each (its end, for a progress bar's last
// state).
const (
	tailLines   = 10
	tailLineMax = 1 << 10
)

// LogFollower follows the logs of a run's pods, each pod's once (StreamLog:
// a stream cut is opened again where it stopped, long lines come in pieces):
// to the run's display, each line prefixed with its label, and into the
// stdout.log of its task in the run record, keeping the pod's last lines for
// its failure (Tail). What befalls a pod's stream befalls that pod's alone,
// but for a cluster that does not serve logs at all (a kubelet-less
// simulation, a user without pods/log): when the first answer to a log
// request refuses it, before any pod's log was served, that is reported once
// and no more logs are asked for. The kube runtime and the Argo follower use
// it.
type LogFollower struct {
	disp   *display.Display
	dir    string
	pods   func(namespace string) PodLogs
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	following map[types.UID]bool
	// seen are the pods followed, as last seen (Follow): whether one's
	// container has ended is read there, not asked of the API server.
	seen     map[types.UID]*corev1.Pod
	last     map[types.UID][]string
	served   bool
	unserved bool
	files    map[string]*os.File
}

// NewLogFollower returns a follower of the logs of the run recorded in dir,
// shown on disp, that reads pods through pods(namespace).
func NewLogFollower(disp *display.Display, dir string, pods func(namespace string) PodLogs) *LogFollower {
	ctx, cancel := context.WithCancel(context.Background())
	return &LogFollower{disp: disp, dir: dir, pods: pods, ctx: ctx, cancel: cancel,
		following: map[types.UID]bool{}, seen: map[types.UID]*corev1.Pod{}, last: map[types.UID][]string{}, files: map[string]*os.File{}}
}

// Follow starts following the log of pod p, unless it is followed already or
// its step container has not started (PodStarted). The caller calls it again
// with each change of p that it sees: the log is followed until p's container
// has ended (and the log is read to its end). Its lines are shown
// prefixed with label, and recorded in the stdout.log of the task of step
// (and foreach index, -1 for none).
func (l *LogFollower) Follow(p *corev1.Pod, label, step string, index int) {
	if !PodStarted(p) {
		return
	}
	l.mu.Lock()
	skip := l.following[p.UID] || l.unserved
	l.following[p.UID] = true
	if _, ok := l.seen[p.UID]; ok || !skip {
		l.seen[p.UID] = p
	}
	l.mu.Unlock()
	if skip {
		return
	}
	f := l.file(step, index)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		served := false
		hooks := logHooks{
			served: func() {
				served = true
				l.mu.Lock()
				l.served = true
				l.mu.Unlock()
			},
			serves: l.isServed,
			ended: func() (bool, error) {
				l.mu.Lock()
				defer l.mu.Unlock()
				return podEnded(l.seen[p.UID]), nil
			},
		}
		err := streamLog(l.ctx, l.pods(p.Namespace), p.Name, func(line string) {
			l.disp.Output(label, false, line)
			l.mu.Lock()
			defer l.mu.Unlock()
			last := append(l.last[p.UID], lastBytes(line, tailLineMax))
			if len(last) > tailLines {
				last = last[len(last)-tailLines:]
			}
			l.last[p.UID] = last
			if f != nil {
				f.WriteString(display.Prefixed(label, 0, line) + "\n")
			}
		}, hooks)
		l.mu.Lock()
		delete(l.seen, p.UID)
		l.mu.Unlock()
		if err == nil || l.ctx.Err() != nil {
			return
		}
		l.mu.Lock()
		unserved := !served && !l.served
		report := !unserved || !l.unserved
		l.unserved = l.unserved || unserved
		l.mu.Unlock()
		switch {
		case unserved && report:
			l.disp.Note("the cluster does not serve pod logs (%v): step output is not shown, and not kept in the run record", oneLine(err.Error()))
		case !unserved:
			l.disp.Note("the log of pod %s (%s) cannot be read further: %v", p.Name, label, oneLine(err.Error()))
		}
	}()
}

// isServed reports whether the cluster served a log.
func (l *LogFollower) isServed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served
}

// lastBytes returns s, or when it is longer than n bytes its last runes of
// at most n bytes after display.Continues.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return display.Continues + s[i:]
}

// file returns the stdout.log of the task of step and index in the run
// record, opened for appending, or nil.
func (l *LogFollower) file(step string, index int) *os.File {
	dir := record.StateDir(l.dir, step, index)
	l.mu.Lock()
	defer l.mu.Unlock()
	if f, ok := l.files[dir]; ok {
		return f
	}
	var f *os.File
	if err := os.MkdirAll(dir, 0o755); err == nil {
		f, _ = os.OpenFile(filepath.Join(dir, record.StdoutLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	}
	l.files[dir] = f
	return f
}

// Tail returns the last log lines of pod p, indented for a failure message,
// or "" when there are none to show. When none of p's lines were seen, it
// asks the API server for them (within ctx, and ten seconds).
func (l *LogFollower) Tail(ctx context.Context, p *corev1.Pod) string {
	l.mu.Lock()
	lines, unserved := l.last[p.UID], l.unserved
	l.mu.Unlock()
	if len(lines) == 0 && !unserved {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, limit := int64(tailLines), int64(tailLines*display.MaxLine)
		data, err := l.pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: plan.ContainerName, TailLines: &n, LimitBytes: &limit}).DoRaw(ctx)
		if err == nil {
			lines = strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		}
	}
	if len(lines) == 0 || len(lines) == 1 && lines[0] == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("last log lines of pod " + p.Name + ":")
	for _, line := range lines {
		b.WriteString("\n  | " + lastBytes(line, tailLineMax))
	}
	return b.String()
}

// Stop ends the streams, waiting a moment for them to deliver what they
// read, and closes the record's logs.
func (l *LogFollower) Stop() {
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	l.cancel()
	<-done
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range l.files {
		if f != nil {
			f.Close()
		}
	}
}

// oneLine returns the first line of s.
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
