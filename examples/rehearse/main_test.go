package main

import (
	"testing"
	"time"

	"github.com/manifoldflow/manifold/flowtest"
)

// TestRehearse: every step is Go code, run here; the accelerators they ask for
// are ignored, as on this machine.
func TestRehearse(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Params("epochs=1"))
	run.WantSuccess(t)
	run.WantRan(t, "prepare", "train", "evaluate")
	for _, step := range []string{"prepare", "train", "evaluate"} {
		run.WantAttempts(t, step, 1)
	}
}

// TestTrainTimeout: train gets ten minutes an attempt and one retry; a train
// that needs eleven fails after twenty minutes, and evaluate does not start.
func TestTrainTimeout(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Takes(11*time.Minute)))
	run.WantFailed(t, "train", "timed out after 10m0s")
	run.WantAttempts(t, "train", 2)
	run.WantSkipped(t, "evaluate", "train failed")
	if got := run.Elapsed(); got != 20*time.Minute {
		t.Errorf("the run took %s on the fake clock, want 20m", got)
	}
}
