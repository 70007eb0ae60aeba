package kube

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	rcluster "github.com/manifoldflow/manifold/runtimes/cluster"
)

// replicatedJobLabel names, on a JobSet's pods, their replicated job.
const replicatedJobLabel = "jobset.sigs.k8s.io/replicatedjob-name"

// logs streams the logs of a run's pods (LogFollower) to the display,
// prefixed with the step (and foreach item and node rank), and into each
// step's stdout.log in the run record.
type logs struct {
	r    *runner
	once sync.Once
	f    *rcluster.LogFollower
}

func newLogs(r *runner) *logs { return &logs{r: r} }

// follower returns the run's LogFollower, made when the display is.
func (l *logs) follower() *rcluster.LogFollower {
	l.once.Do(func() {
		l.f = rcluster.NewLogFollower(l.r.Disp, l.r.Dir, func(ns string) rcluster.PodLogs { return l.r.c.Client.CoreV1().Pods(ns) })
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

// label is the prefix of p's lines: the unit's label, the foreach item of a
// JobSet's replicated job, and a multi-node step's rank.
func (l *logs) label(u *unit, p *corev1.Pod) string {
	label := u.Label
	if rj := p.Labels[replicatedJobLabel]; u.kind == "JobSet" && strings.HasPrefix(rj, "item") {
		label += "[" + strings.TrimPrefix(rj, "item") + "]"
	}
	if u.Step.Nodes > 1 {
		label += "/" + rcluster.PodRank(p)
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
