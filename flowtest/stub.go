package flowtest

import (
	"context"
	"fmt"
	"time"

	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/sdk"
)

// An Action is what a stubbed step does in an attempt (Stub). Puts, Takes and
// Exit make the usual ones; any func(*Call) error is one too, for a step that
// must decide, say by its attempt or its item:
//
//	flowtest.Stub("train", func(c *flowtest.Call) error {
//		if c.Attempt < 3 {
//			return &flowtest.ExitError{Code: 137}
//		}
//		return c.Put("model", "s3://models/llama-8b")
//	})
//
// An action that returns nil lets the next one run; one that returns an error
// ends the attempt: an ExitError with its code, any other error with exit code
// 1. An attempt whose actions all return nil ends with exit code 0.
type Action func(*Call) error

// Call is one attempt of a stubbed step (or of one item of a foreach step).
// Its sdk.Context is the one the step's Go function would get: its params,
// foreach item, and the run's artifacts (Put and Get).
type Call struct {
	*sdk.Context
	// Attempt is the attempt's number, 1 for the first.
	Attempt int
	// Argv is what the step would run on this machine, with $(NAME)
	// references expanded: a Command step's command, or a Run step's
	// `<program> step NAME`.
	Argv []string
	// Env holds the variables the step's process would get over the runner's
	// environment: its pod's (MANIFOLD_PARAM_*, MANIFOLD_ITEM, the step's own
	// sdk.Env) and MANIFOLD_RUN_DIR and MANIFOLD_ARTIFACTS.
	Env map[string]string

	took, timeout time.Duration
	cancel        context.CancelCauseFunc
}

// Take spends d of the fake clock in this attempt. When that takes the attempt
// past its step's Timeout, the clock stops at the timeout, the attempt ends
// timed out (its context is done, Put fails), and Take returns that error.
func (c *Call) Take(d time.Duration) error {
	if err := context.Cause(c); err != nil {
		return err
	}
	c.took += max(d, 0)
	if c.timeout > 0 && c.took > c.timeout {
		c.took = c.timeout
		c.cancel(dag.TimedOut(c.timeout))
		return context.Cause(c)
	}
	return nil
}

// Took returns how long the attempt has taken so far on the fake clock.
func (c *Call) Took() time.Duration { return c.took }

// Put stores v as the step's artifact name, as sdk.Context.Put does; after
// the attempt has timed out, it fails as the killed process would.
func (c *Call) Put(name string, v any) error {
	if err := context.Cause(c); err != nil {
		return fmt.Errorf("artifact %q: %w", name, err)
	}
	return c.Context.Put(name, v)
}

// ExitError ends a stubbed attempt with an exit code, as a process's exit
// status would.
type ExitError struct {
	Code int
}

// Error reads as the run command reports a process's exit: "exit status 2".
func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// Exit is the action of a process that exits with code: 0 lets the attempt go
// on (and succeed, when it is the last action); another code ends it failed.
func Exit(code int) Action {
	return func(*Call) error {
		if code == 0 {
			return nil
		}
		return &ExitError{Code: code}
	}
}

// Puts is the action of a step that writes the artifact name with value v, as
// its code would with sdk.Context.Put (a Command step: a JSON file in
// MANIFOLD_ARTIFACTS).
func Puts(name string, v any) Action {
	return func(c *Call) error { return c.Put(name, v) }
}

// Takes is the action of a step that runs for d: it moves the fake clock (see
// Call.Take), so that a Timeout shorter than d ends the attempt.
func Takes(d time.Duration) Action {
	return func(c *Call) error { return c.Take(d) }
}
