package main

import (
	"errors"
	"slices"
	"testing"

	"github.com/manifoldflow/manifold/flowtest"
)

// TestDynamic: list finds 3 shards, process runs once per shard with its
// item as JSON, pick takes the large branch, small is not taken, and report
// joins the branch taken.
func TestDynamic(t *testing.T) {
	run := flowtest.Run(t, flow)
	run.WantSuccess(t)
	want := []string{"list", "process[0]", "process[1]", "process[2]", "pick", "large", "report"}
	if got := run.Started(); !slices.Equal(got, want) {
		t.Errorf("started %q, want %q", got, want)
	}
	task, _ := run.Task("process[1]")
	if task.Item != `{"name":"shard-1","rows":20}` {
		t.Errorf("process[1] ran item %q", task.Item)
	}
	if got := flowtest.ItemArtifact[int](t, run, "process", 2, "rows"); got != 30 {
		t.Errorf("process[2]'s rows = %d, want 30", got)
	}
	run.WantSkipped(t, "small", `not taken: pick's size is "large", and small runs when it is "small"`)
	if got := flowtest.Artifact[string](t, run, "report", "report"); got != "large: 60 rows" {
		t.Errorf("report = %q", got)
	}
}

// TestDynamicCounts: no shard (the join sees none and nothing fails), one
// shard (the other branch).
func TestDynamicCounts(t *testing.T) {
	for _, tc := range []struct {
		shards  string
		started []string
		report  string
	}{
		{"0", []string{"list", "pick", "small", "report"}, "small: 0 rows"},
		{"1", []string{"list", "process[0]", "pick", "small", "report"}, "small: 10 rows"},
	} {
		t.Run(tc.shards, func(t *testing.T) {
			run := flowtest.Run(t, flow, flowtest.Params("shards="+tc.shards))
			run.WantSuccess(t)
			if got := run.Started(); !slices.Equal(got, tc.started) {
				t.Errorf("started %q, want %q", got, tc.started)
			}
			if got := flowtest.Artifact[string](t, run, "report", "report"); got != tc.report {
				t.Errorf("report = %q, want %q", got, tc.report)
			}
		})
	}
}

// TestDynamicRetriesOneItem: an item that fails once runs again, alone
// (Retry(1)); one that fails every time fails the run and stops what waits.
func TestDynamicRetriesOneItem(t *testing.T) {
	flaky := flowtest.Stub("process", func(c *flowtest.Call) error {
		if c.Index() == 1 && c.Attempt == 1 {
			return errors.New("spot instance reclaimed")
		}
		return process(c.Context)
	})
	run := flowtest.Run(t, flow, flaky)
	run.WantSuccess(t)
	run.WantAttempts(t, "process[0]", 1)
	run.WantAttempts(t, "process[1]", 2)
	run.WantAttempts(t, "process[2]", 1)

	down := flowtest.Stub("process", func(c *flowtest.Call) error {
		if c.Index() == 2 {
			return errors.New("shard unreadable")
		}
		return process(c.Context)
	})
	run = flowtest.Run(t, flow, down)
	run.WantFailed(t, "process[2]", "shard unreadable")
	run.WantSkipped(t, "pick", "process failed")
	run.WantSkipped(t, "report", "not started")
}

// TestDynamicFailOnce: with fail-once, that shard's first attempt fails and
// it alone runs again.
func TestDynamicFailOnce(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Params("fail-once=1"))
	run.WantSuccess(t)
	run.WantAttempts(t, "process[0]", 1)
	run.WantAttempts(t, "process[1]", 2)
	run.WantAttempts(t, "process[2]", 1)
}
