package kube

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// tailLines is how many of a failed pod's last log lines its failure shows.
const tailLines = 10

// replicatedJobLabel names, on a JobSet's pods, their replicated job.
const replicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"

// logs streams the logs of a run's pods to the display, prefixed with the step
// (and foreach item and node rank), and into each step's stdout.log in the run
// record. A cluster that does not serve logs (a kubelet-less simulation, or a
// user without pods/log) is reported once.
type logs struct {
	r      *runner
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	following map[types.UID]bool
	last      map[types.UID][]string
	served    bool
	unserved  bool
	files     map[string]*os.File
}

func newLogs(r *runner) *logs {
	ctx, cancel := context.WithCancel(context.Background())
	return &logs{r: r, ctx: ctx, cancel: cancel, following: map[types.UID]bool{}, last: map[types.UID][]string{}, files: map[string]*os.File{}}
}

// follow starts streaming the logs of u's pods whose container has started.
func (l *logs) follow(_ context.Context, u *unit, pods []*corev1.Pod) {
	for _, p := range pods {
		if !started(p) {
			continue
		}
		l.mu.Lock()
		skip := l.following[p.UID] || l.unserved
		l.following[p.UID] = true
		l.mu.Unlock()
		if skip {
			continue
		}
		label := l.label(u, p)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.stream(u, p, label)
		}()
	}
}

// started reports whether p's step container runs or has run.
func started(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == plan.ContainerName && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// label is the prefix of p's lines: the unit's label, the foreach item of a
// JobSet's replicated job, and a multi-node step's rank.
func (l *logs) label(u *unit, p *corev1.Pod) string {
	label := u.Label
	if rj := p.Labels[replicatedJobLabel]; u.kind == "JobSet" && strings.HasPrefix(rj, "item") {
		label += "[" + strings.TrimPrefix(rj, "item") + "]"
	}
	if u.Step.Nodes > 1 {
		label += "/" + podRank(p)
	}
	return label
}

func (l *logs) stream(u *unit, p *corev1.Pod, label string) {
	req := l.r.c.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: plan.ContainerName, Follow: true})
	rc, err := req.Stream(l.ctx)
	if err != nil {
		if l.ctx.Err() != nil {
			return
		}
		if unanswered(err) {
			// The API server did not answer (an outage, which the run
			// follows): the next look at the pod tries again. An answer that
			// is an error (a 500 when it cannot reach the node) is the
			// cluster's word.
			l.mu.Lock()
			delete(l.following, p.UID)
			l.mu.Unlock()
			return
		}
		l.mu.Lock()
		report := !l.served && !l.unserved
		if !l.served {
			l.unserved = true
		}
		l.mu.Unlock()
		if report {
			l.r.Disp.Note("the cluster does not serve pod logs (%v): step output is not shown, and not kept in the run record", oneLine(err.Error()))
		}
		return
	}
	defer rc.Close()
	l.mu.Lock()
	l.served = true
	l.mu.Unlock()
	f := l.file(u)
	scanLines(rc, func(line string) {
		l.r.Disp.Output(label, false, line)
		l.mu.Lock()
		last := append(l.last[p.UID], line)
		if len(last) > tailLines {
			last = last[len(last)-tailLines:]
		}
		l.last[p.UID] = last
		if f != nil {
			f.WriteString(label + " | " + line + "\n")
		}
		l.mu.Unlock()
	})
}

// file returns u's stdout.log in the run record, opened for appending, or nil.
func (l *logs) file(u *unit) *os.File {
	dir := record.StateDir(l.r.Dir, u.Step.Name, u.Index)
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

// tail returns the last log lines of pod p, indented for a failure message, or ""
// when there are none to show.
func (l *logs) tail(ctx context.Context, p *corev1.Pod) string {
	l.mu.Lock()
	lines, unserved := l.last[p.UID], l.unserved
	l.mu.Unlock()
	if len(lines) == 0 && !unserved {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n := int64(tailLines)
		data, err := l.r.c.client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: plan.ContainerName, TailLines: &n}).DoRaw(ctx)
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
		b.WriteString("\n  | " + line)
	}
	return b.String()
}

// stop ends the streams, waiting a moment for them to write what they read.
func (l *logs) stop() {
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

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
