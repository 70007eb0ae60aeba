package kube_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// flowObjects lists the Jobs and pods of namespace ns labelled with flow and
// run id, with the UID label of each.
func flowObjects(t *testing.T, c *simcluster.Cluster, ns, flow, id string) []string {
	t.Helper()
	var out []string
	for _, gvr := range kinds {
		list, err := c.Dynamic.Resource(gvr).Namespace(ns).List(context.Background(), metav1.ListOptions{
			LabelSelector: plan.LabelFlow + "=" + flow + "," + plan.LabelRun + "=" + id,
		})
		if err != nil {
			continue // a kind the cluster does not serve
		}
		for _, o := range list.Items {
			out = append(out, o.GetKind()+" "+o.GetName()+" "+o.GetLabels()[plan.LabelRunUID])
		}
	}
	slices.Sort(out)
	return out
}

// TestCleanupLeavesOtherFlows: two flows run under one run ID in one
// namespace; the one that ends and cleans up deletes its own objects and
// leaves the other's, which its watches did not count either.
func TestCleanupLeavesOtherFlows(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	step := func(flow string) *sdk.Flow {
		return sdk.NewFlow(flow, sdk.Image("example.com/flow:v1")).Step("s", sdk.Command("s"))
	}
	const id = "shared-id"

	ob := options(c, ns, t.TempDir())
	ob.RunID, ob.Keep, ob.NoCheck = id, true, true
	if r := runFlow(t, context.Background(), compileFlow(t, step("own-b")), ob); r.err != nil {
		t.Fatalf("run of own-b: %v", r.err)
	}
	kept := flowObjects(t, c, ns, "own-b", id)
	if len(kept) == 0 {
		t.Fatal("own-b's run with --keep left nothing on the cluster")
	}

	oa := options(c, ns, t.TempDir())
	oa.RunID, oa.NoCheck = id, true
	r := runFlow(t, context.Background(), compileFlow(t, step("own-a")), oa)
	if r.err != nil {
		t.Fatalf("run of own-a: %v", r.err)
	}
	if left := flowObjects(t, c, ns, "own-a", id); len(left) > 0 {
		t.Errorf("own-a's run left %v", left)
	}
	if got := flowObjects(t, c, ns, "own-b", id); !slices.Equal(got, kept) {
		t.Errorf("own-a's cleanup changed own-b's objects under the same run ID: %v, were %v", got, kept)
	}
}

// TestStaleObjectsNotAdopted: a run ID whose objects are left on the cluster
// by a run whose record is gone (a failed run, kept for inspection) is not
// taken for a run of its own by a new run under that ID: the new run refuses
// to start, naming the Job and what to do, and leaves the objects as they are
// and no record behind.
func TestStaleObjectsNotAdopted(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	f := sdk.NewFlow("stale", sdk.Image("example.com/flow:v1")).
		Step("work", sdk.Command("work"), sdk.Label(simcluster.LabelFail, "true"))
	const id = "stale-id"
	o := options(c, ns, t.TempDir())
	o.RunID, o.NoCheck = id, true
	if r := runFlow(t, context.Background(), compileFlow(t, f), o); r.err == nil {
		t.Fatal("the first run succeeded; want it to fail")
	}
	before := flowObjects(t, c, ns, "stale", id)
	if !slices.ContainsFunc(before, func(s string) bool { return strings.HasPrefix(s, "Job stale-work-") }) {
		t.Fatalf("the failed run left no Job: %v", before)
	}

	// Another machine, or a removed .manifold: no record of the run.
	o.Root = t.TempDir()
	r := runFlow(t, context.Background(), compileFlow(t, f), o)
	if r.err == nil || r.res != nil {
		t.Fatalf("a new run under the ID of objects left on the cluster: result %+v, error %v; want it refused before it starts", r.res, r.err)
	}
	msg := r.err.Error()
	for _, want := range []string{"Job " + ns + "/stale-work-", "not this run's", "kubectl delete", "pick another --run-id"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if after := flowObjects(t, c, ns, "stale", id); !slices.Equal(after, before) {
		t.Errorf("the refused run changed the objects on the cluster: %v, were %v", after, before)
	}
	if _, err := os.Stat(filepath.Join(o.Root, id, "run.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused run wrote a record: %v", err)
	}
}

// TestResumeRerunsChangedSteps: a run resumed after the flow changed runs
// again the step that changed and the step that waits for it, though the
// first succeeded before, says which changed, and keeps the unchanged step
// that succeeded.
func TestResumeRerunsChangedSteps(t *testing.T) {
	c := simcluster.Shared(t)
	ns := c.Namespace(t)
	flow := func(version string, fail bool) *sdk.Flow {
		var last []sdk.StepOption
		if fail {
			last = append(last, sdk.Label(simcluster.LabelFail, "true"))
		}
		return sdk.NewFlow("changed", sdk.Image("example.com/flow:v1")).
			Step("prep", sdk.Command("prep", version)).
			Step("side", sdk.Command("side")).
			Step("train", append(last, sdk.After("prep"), sdk.Command("train"))...)
	}
	o := options(c, ns, t.TempDir())
	o.RunID, o.NoCheck = "changed-id", true
	first := runFlow(t, context.Background(), compileFlow(t, flow("v1", true)), o)
	if first.err == nil || first.tasks["prep"].State != record.Succeeded || first.tasks["side"].State != record.Succeeded {
		t.Fatalf("first run: %v, tasks %+v; want prep and side succeeded, train failed", first.err, first.tasks)
	}

	r := runFlow(t, context.Background(), compileFlow(t, flow("v2", false)), o)
	if r.err != nil {
		t.Fatalf("resumed run: %v", r.err)
	}
	out := r.out.String()
	if strings.Contains(out, "prep: succeeded in an earlier attempt") {
		t.Errorf("the changed step prep was taken from the run's earlier attempt")
	}
	if !strings.Contains(out, "side: succeeded in an earlier attempt") {
		t.Errorf("the unchanged step side was not kept")
	}
	if !strings.Contains(out, "changed since") || !strings.Contains(out, "prep") {
		t.Errorf("the resumed run does not say that prep changed")
	}
	if p := r.tasks["prep"]; p.State != record.Succeeded || !p.Start.After(first.tasks["prep"].End) {
		t.Errorf("prep recorded %+v; want it run again after the first run's (which ended %s)", p, first.tasks["prep"].End)
	}
	if tr := r.tasks["train"]; tr.State != record.Succeeded {
		t.Errorf("train recorded %+v; want succeeded", tr)
	}
}
