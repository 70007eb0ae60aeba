package main

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/manifoldflow/manifold/flowtest"
)

// TestForeach: plan, then one process per region, then the report that joins
// them.
func TestForeach(t *testing.T) {
	run := flowtest.Run(t, flow)
	run.WantSuccess(t)
	want := []string{"plan", "process[0]", "process[1]", "process[2]", "report"}
	if got := run.Started(); !slices.Equal(got, want) {
		t.Errorf("started %q, want %q", got, want)
	}
	run.WantBefore(t, "process", "report")
	for i, region := range regions {
		task, _ := run.Task(fmt.Sprintf("process[%d]", i))
		if task.Item != region {
			t.Errorf("process[%d] ran item %q, want %q", i, task.Item, region)
		}
	}
	if got, want := flowtest.ItemArtifact[string](t, run, "process", 1, "result"), "us-west-2: 200 objects"; got != want {
		t.Errorf("process[1]'s result = %q, want %q", got, want)
	}
	want2 := "us-east-1: 100 objects\nus-west-2: 200 objects\neu-west-1: 300 objects"
	if got := flowtest.Artifact[string](t, run, "report", "summary"); got != want2 {
		t.Errorf("summary = %q, want %q", got, want2)
	}
}

// TestForeachRetriesAnItem: process retries each region on its own (Retry(3));
// a region that fails twice still reaches the report, and one that fails every
// attempt stops it.
func TestForeachRetriesAnItem(t *testing.T) {
	flaky := flowtest.Stub("process", func(c *flowtest.Call) error {
		if c.Item() == "eu-west-1" && c.Attempt <= 2 {
			return errors.New("throttled")
		}
		return process(c.Context)
	})
	run := flowtest.Run(t, flow, flaky)
	run.WantSuccess(t)
	run.WantAttempts(t, "process[0]", 1)
	run.WantAttempts(t, "process[2]", 3)

	down := flowtest.Stub("process", func(c *flowtest.Call) error {
		if c.Item() == "us-west-2" {
			return errors.New("region unavailable")
		}
		return process(c.Context)
	})
	run = flowtest.Run(t, flow, down)
	run.WantAttempts(t, "process[1]", 4)
	run.WantFailed(t, "process[1]", "region unavailable")
	run.WantSkipped(t, "report", "process failed")
	if got, want := flowtest.ItemArtifact[string](t, run, "process", 2, "result"), "eu-west-1: 300 objects"; got != want {
		t.Errorf("process[2], which does not wait for process[1], put %q, want %q", got, want)
	}
}
