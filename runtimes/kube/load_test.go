package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/runtimes/kube"
)

// TestRequestsPerStep runs a fan-out of 100 steps on the simulated cluster's
// kwok nodes and counts, by verb and resource, the requests the runner makes:
// each step is created once and dry-run once (a Job and its pod), the informers
// list each kind once at the start, and nothing else grows with the steps: no
// list, get or watch per step or per change (but for following each pod's log
// where the cluster serves logs), no delete per step (the run's objects go with
// a few deletecollections per kind: its Jobs by shares of its steps, four at
// once, then whatever is left by the run's label).
func TestRequestsPerStep(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	const steps = 100
	p := compileFlow(t, testflows.FanOut(steps))
	o := options(c, ns, t.TempDir())
	o.Requests = &kube.Requests{}
	o.RunID = fmt.Sprintf("requests-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := kube.Run(ctx, p, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Left) > 0 {
		t.Fatalf("left on the cluster: %v", res.Left)
	}
	counts := o.Requests.Counts()
	t.Logf("%d requests for %d steps: %s", o.Requests.Total(), steps, o.Requests)
	for _, want := range []struct {
		req kube.Request
		n   int
	}{
		{kube.Request{Verb: "create", Resource: "jobs"}, steps},
		{kube.Request{Verb: "create (dry run)", Resource: "jobs"}, steps},
		{kube.Request{Verb: "create (dry run)", Resource: "pods"}, steps},
	} {
		if got := counts[want.req]; got != want.n {
			t.Errorf("%s: %d requests, want %d (one per step)", want.req, got, want.n)
		}
	}
	// The pods go with one request of the runner's, not one each by the
	// garbage collector.
	if got := counts[kube.Request{Verb: "deletecollection", Resource: "pods"}]; got != 1 {
		t.Errorf("deletecollection pods: %d requests, want 1", got)
	}
	// What does not grow with the steps: a few of each, whatever the run's size.
	// The informers list and watch Jobs, pods and Services once each (a watch
	// that the API server ends is started again: a handful more).
	const few = 10
	other := 0
	for req, n := range counts {
		if req.Resource == "pods/log" {
			// A pod's log is followed once, where the cluster serves logs (kwok's
			// nodes do not: the first refusal stops the asking).
			if n > steps {
				t.Errorf("%s: %d requests for %d steps, more than one a pod", req, n, steps)
			}
			other -= n
		}
		switch req.Verb {
		case "list", "watch", "get", "delete", "deletecollection", "update", "patch":
			if n > few && req.Resource != "pods/log" {
				t.Errorf("%s: %d requests for %d steps; it must not grow with the steps (at most %d)", req, n, steps, few)
			}
		}
		if req.Verb != "create" && req.Verb != "create (dry run)" {
			other += n
		}
	}
	if other > 4*few {
		t.Errorf("%d requests other than creates for %d steps: %s", other, steps, o.Requests)
	}
	if total := o.Requests.Total(); total > 4*steps+4*few {
		t.Errorf("%d requests for %d steps (%.2f a step), want at most 4 a step (3 and a pod's log) and %d more: %s", total, steps, float64(total)/steps, 4*few, o.Requests)
	}
}
