package e2e_test

import (
	"context"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/simcluster"
)

// TestJobSetFailedStepStopsDependents makes neuron-train's train step fail
// (kwok fails pods labelled sim.manifold.dev/fail): the JobSet controller
// restarts its JobSet as often as the plan's retries allow (failurePolicy
// maxRestarts), then fails it, and evaluate, which waits for train, is never
// created.
func TestJobSetFailedStepStopsDependents(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "neuron-train")
	objs := labelPods(t, e.compileTarget(t, "jobset"), "train", simcluster.LabelFail, "true")
	r := runOrdered(t, c, c.Namespace(t), objs)
	if _, ok := r.done["prepare"]; !ok {
		t.Errorf("prepare did not complete: %v", checkComplete(e, r))
	}
	if r.failed["train"] == "" {
		t.Fatalf("train: want its JobSet failed, got done %v, pending %q", keys(r.done), r.pending["train"])
	}
	if want := e.step("train").Retry; r.restarts["train"] != want {
		t.Errorf("train's JobSet failed after %d restarts, want the plan's %d retries: %s", r.restarts["train"], want, r.failed["train"])
	}
	if _, ok := r.created["evaluate"]; ok {
		t.Error("evaluate was created although train, which it waits for, failed")
	}
}

// TestArgoFailedStepStopsDependents makes hello's middle step fail under Argo:
// the Workflow fails, the step's node failed, and echo, which waits for it,
// never starts.
func TestArgoFailedStepStopsDependents(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "hello")
	objs := labelPods(t, e.compileTarget(t, "argo"), "shout", simcluster.LabelFail, "true")
	ns := c.Namespace(t)
	r := runWorkflow(t, c, ns, objs)
	if r.phase != "Failed" {
		t.Errorf("Workflow %s ended %q, want Failed", r.name, r.phase)
	}
	if _, ok := r.done["greet"]; !ok {
		t.Errorf("greet did not complete: %v", checkComplete(e, r.jobRun))
	}
	if !strings.HasPrefix(r.failed["shout"], "Failed") {
		t.Errorf("shout: want its node Failed, got %q (done %v)", r.failed["shout"], keys(r.done))
	}
	if _, ok := r.created["echo"]; ok {
		t.Error("echo started although shout, which it waits for, failed")
	}
	if pods := stepPods(context.Background(), t, c, ns, "echo"); len(pods) > 0 {
		t.Errorf("echo ran %d pods although shout failed", len(pods))
	}
}
