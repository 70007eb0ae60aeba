package kube

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/plan"
)

// replicatedJobLabel names, on a JobSet's pods, their replicated job.
const replicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"

// logs streams the logs of a run's pods (LogFollower) to the display,
// prefixed with the step (and foreach item and node rank), and into each
// step's stdout.log in the run record.
type logs struct {
	r    *runner
	once sync.Once
	f    *LogFollower
}

func newLogs(r *runner) *logs { return &logs{r: r} }

// follower returns the run's LogFollower, made when the display is.
func (l *logs) follower() *LogFollower {
	l.once.Do(func() {
		l.f = NewLogFollower(l.r.Disp, l.r.Dir, func(ns string) PodLogs { return l.r.c.client.CoreV1().Pods(ns) })
	})
	return l.f
}

// follow streams the logs of u's pods whose container has started, and
// tells the streams of the pods' changes.
func (l *logs) follow(_ context.Context, u *unit, pods []*corev1.Pod) {
	for _, p := range pods {
		l.follower().Follow(p, l.label(u, p), u.Step.Name, u.Index)
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

// tail returns the last log lines of pod p, indented for a failure message, or ""
// when there are none to show.
func (l *logs) tail(ctx context.Context, p *corev1.Pod) string {
	return l.follower().Tail(ctx, p)
}

// stop ends the streams, waiting a moment for them to write what they read.
func (l *logs) stop() {
	l.follower().Stop()
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
