package main

import (
	"slices"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/flowtest"
)

// TestTrain: the step's DRA claims and Neuron devices do not matter to a test;
// its command line and its Retry(1) do.
func TestTrain(t *testing.T) {
	var argv []string
	run := flowtest.Run(t, flow, flowtest.Params("epochs=10"), flowtest.Stub("train", func(c *flowtest.Call) error {
		argv = c.Argv
		if c.Attempt == 1 {
			// The Neuron runtime lost a device: the first attempt fails.
			return &flowtest.ExitError{Code: 134}
		}
		return c.Put("model", "s3://models/neuron-dra")
	}))
	run.WantSuccess(t)
	run.WantAttempts(t, "train", 2)
	if want := []string{"torchrun", "--nproc_per_node=32", "train.py", "--epochs", "10"}; !slices.Equal(argv, want) {
		t.Errorf("train runs %q, want %q", argv, want)
	}
	if got := flowtest.Artifact[string](t, run, "train", "model"); got != "s3://models/neuron-dra" {
		t.Errorf("model = %q", got)
	}
}

// TestTrainWithoutRetry: with --set train.retry=0 the first failure is the
// last, with its exit code in the record.
func TestTrainWithoutRetry(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Set("train.retry=0"), flowtest.Stub("train", flowtest.Takes(time.Hour), flowtest.Exit(134)))
	run.WantFailed(t, "train", "exit status 134")
	run.WantAttempts(t, "train", 1)
	if task, _ := run.Task("train"); task.ExitCode == nil || *task.ExitCode != 134 {
		t.Errorf("train's exit code = %v, want 134", task.ExitCode)
	}
}
