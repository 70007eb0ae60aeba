package kube

import (
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/sdk"
)

// TestPendingClockSkipsOutage: after an outage, a step whose pods could not
// start has waited only the time the API server answered: its pending timeout
// does not end during the outage, and its timers are set again for what is
// left of its grace and timeout.
func TestPendingClockSkipsOutage(t *testing.T) {
	p, errs := compile.Compile(sdk.NewFlow("clock", sdk.Image("example.com/flow:v1")).Step("big", sdk.Command("x")), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	u := &unit{Unit: dag.NewUnit(p.Step("big"), -1), kind: "Job", name: "clock-big"}
	r := &runner{Run: dag.New(p, "clock", t.TempDir()), o: Options{PendingGrace: 10 * time.Second, PendingTimeout: 12 * time.Second},
		w: &watcher{changed: make(chan struct{}, 1)}, units: []*unit{u}}
	r.Add(u.Unit)
	now := time.Now()
	// Stuck for 20s, 15s of them an outage: 5s count.
	u.created, u.stuckSince = true, now.Add(-20*time.Second)
	r.skip(15*time.Second, now)
	if waited := now.Sub(u.stuckSince); waited != 5*time.Second {
		t.Errorf("waited %s after the outage; want 5s", waited)
	}
	if len(u.timers) != 2 {
		t.Errorf("%d timers set again; want the grace's and the timeout's", len(u.timers))
	}
	r.pending(u, observed{exists: true, stuck: "0/2 nodes are available: 2 Insufficient cpu"}, now)
	if st := r.Task(u.Unit).State; st.Final() || u.reported {
		t.Errorf("after the outage the step is %s (reported %v); want it still waiting, unreported", st, u.reported)
	}
	r.stopTimers(u)
}
