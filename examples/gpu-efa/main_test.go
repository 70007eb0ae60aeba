package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/flowtest"
)

// torchrun stands for the training job: it checks nothing, and leaves the
// checkpoint a real run would.
var torchrun = flowtest.Stub("train", flowtest.Takes(4*time.Hour), flowtest.Puts("checkpoint", "s3://ckpt/llama-8b/step-1000"))

// TestTrain: the model param reaches torchrun's command line, NCCL_DEBUG its
// environment.
func TestTrain(t *testing.T) {
	var argv []string
	var env map[string]string
	run := flowtest.Run(t, flow, flowtest.Params("model=llama-70b"), flowtest.Stub("train", func(c *flowtest.Call) error {
		argv, env = c.Argv, c.Env
		return nil
	}, flowtest.Takes(4*time.Hour), flowtest.Puts("checkpoint", "s3://ckpt/llama-70b/step-1000")))
	run.WantSuccess(t)
	if want := []string{"torchrun", "--nproc_per_node=8", "train.py", "--model", "llama-70b"}; !slices.Equal(argv, want) {
		t.Errorf("train runs %q, want %q", argv, want)
	}
	if env["NCCL_DEBUG"] != "WARN" || env["MANIFOLD_PARAM_MODEL"] != "llama-70b" {
		t.Errorf("train's environment lacks NCCL_DEBUG=WARN or MANIFOLD_PARAM_MODEL=llama-70b: %v", env)
	}
	if got := flowtest.Artifact[string](t, run, "train", "checkpoint"); got != "s3://ckpt/llama-70b/step-1000" {
		t.Errorf("checkpoint = %q", got)
	}
	if got := run.Elapsed(); got != 4*time.Hour {
		t.Errorf("the run took %s on the fake clock, want 4h", got)
	}
}

// TestTrainRetriesOnce: Retry(1) gives a job killed on its first attempt (137,
// as the OOM killer leaves it) a second one.
func TestTrainRetriesOnce(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Stub("train", func(c *flowtest.Call) error {
		if c.Attempt == 1 {
			return &flowtest.ExitError{Code: 137}
		}
		return c.Put("checkpoint", "s3://ckpt/llama-8b/step-1000")
	}))
	run.WantSuccess(t)
	run.WantAttempts(t, "train", 2)

	run = flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Exit(137)))
	run.WantFailed(t, "train", "exit status 137")
	run.WantAttempts(t, "train", 2)
}

// TestTrainTimesOut: a job that would run 13 hours is stopped at its 12-hour
// Timeout, twice, and leaves no checkpoint.
func TestTrainTimesOut(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Stub("train", flowtest.Takes(13*time.Hour), flowtest.Puts("checkpoint", "late")))
	run.WantFailed(t, "train", "timed out after 12h0m0s")
	run.WantAttempts(t, "train", 2)
	if got := run.Elapsed(); got != 24*time.Hour {
		t.Errorf("the run took %s on the fake clock, want 24h", got)
	}
	if _, err := os.Stat(filepath.Join(run.Dir(), "train", "checkpoint.json")); err == nil {
		t.Error("a job stopped at its timeout left a checkpoint")
	}

	run = flowtest.Run(t, flow, flowtest.Set("train.timeout=14h"), torchrun)
	run.WantSuccess(t)
}
