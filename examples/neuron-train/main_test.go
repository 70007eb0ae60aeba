package main

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/flowtest"
)

// TestNeuronTrain: prepare's shards reach evaluate, around a stubbed torchrun
// (the training job on the two trn1.32xlarge nodes) that gets the epochs param
// on its command line, takes five hours and leaves its model.
func TestNeuronTrain(t *testing.T) {
	var argv []string
	run := flowtest.Run(t, flow, flowtest.Params("epochs=1"), flowtest.Stub("train", func(c *flowtest.Call) error {
		argv = c.Argv
		return c.Take(5 * time.Hour)
	}, flowtest.Puts("model", "/data/models/neuron-train")))
	run.WantSuccess(t)
	run.WantRan(t, "prepare", "train", "evaluate")
	if want := []string{"torchrun", "--nproc_per_node=32", "train.py", "--epochs", "1"}; !slices.Equal(argv, want) {
		t.Errorf("train runs %q, want %q", argv, want)
	}
	if got := flowtest.Artifact[[]string](t, run, "prepare", "shards"); len(got) != 4 {
		t.Errorf("prepare put %d shards, want 4: %q", len(got), got)
	}
	report := flowtest.Artifact[map[string]any](t, run, "evaluate", "report")
	if diff := cmp.Diff(map[string]any{"shards": 4.0, "epochs": "1"}, report); diff != "" {
		t.Errorf("evaluate's report (-want +got):\n%s", diff)
	}
	if got := flowtest.Artifact[string](t, run, "train", "model"); got != "/data/models/neuron-train" {
		t.Errorf("train's model = %q", got)
	}
}

// TestTrainFailureStopsEvaluate: torchrun failing all three attempts (Retry(2))
// fails the run; evaluate does not start.
func TestTrainFailureStopsEvaluate(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Takes(10*time.Minute), flowtest.Exit(1)))
	if run.Err() == nil {
		t.Fatal("the run succeeded, though train failed")
	}
	run.WantAttempts(t, "train", 3)
	run.WantFailed(t, "train", "exit status 1")
	run.WantSkipped(t, "evaluate", "train failed")
	if got, want := run.Err().Error(), "step train failed: exit status 1; not started: evaluate"; got != want {
		t.Errorf("the run's error is %q, want %q", got, want)
	}
}

// TestTrainTimeout: six hours is the most an attempt of train gets; a run
// that needs seven times out on every attempt, and --set can give it more.
func TestTrainTimeout(t *testing.T) {
	slow := flowtest.Stub("train", flowtest.Takes(7*time.Hour))
	run := flowtest.Run(t, flow, slow)
	run.WantFailed(t, "train", "timed out after 6h0m0s")
	run.WantAttempts(t, "train", 3)
	run.WantSkipped(t, "evaluate", "train failed")
	if got := run.Elapsed(); got != 18*time.Hour {
		t.Errorf("the run took %s on the fake clock, want 18h", got)
	}

	run = flowtest.Run(t, flow, flowtest.Set("train.timeout=8h"), slow)
	run.WantSuccess(t)
}
