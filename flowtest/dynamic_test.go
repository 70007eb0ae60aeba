package flowtest_test

import (
	"errors"
	"testing"

	"github.com/manifoldflow/manifold/flowtest"
	"github.com/manifoldflow/manifold/sdk"
)

// branchFlow: choose puts "a"; step a runs, b is not taken, after-b waits only
// for b and is not taken either, and join waits for a and b.
func branchFlow(a func(*sdk.Context) error) *sdk.Flow {
	return sdk.NewFlow("branch", sdk.Image("registry.example.com/branch:v1")).
		Step("choose", sdk.Run(func(c *sdk.Context) error { return c.Put("route", "a") })).
		Step("a", sdk.Run(a), sdk.When("choose", "route", "a")).
		Step("b", sdk.Run(func(*sdk.Context) error { return nil }), sdk.When("choose", "route", "b")).
		Step("after-b", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("b")).
		Step("join", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("a", "b"))
}

// TestBranchNotTakenSpreads: what waits only for steps not taken is not taken;
// a join runs after the branch taken.
func TestBranchNotTakenSpreads(t *testing.T) {
	run := flowtest.Run(t, branchFlow(func(*sdk.Context) error { return nil }))
	run.WantSuccess(t)
	run.WantSkipped(t, "b", `not taken: choose's route is "a", and b runs when it is "b"`)
	run.WantSkipped(t, "after-b", "not taken: b not taken")
	run.WantRan(t, "choose", "a", "join")
}

// TestBranchTakenFails: a join after a branch whose step failed does not run,
// and the run fails.
func TestBranchTakenFails(t *testing.T) {
	run := flowtest.Run(t, branchFlow(func(*sdk.Context) error { return errors.New("broke") }))
	run.WantFailed(t, "a", "broke")
	run.WantSkipped(t, "join", "not started: a failed")
	run.WantSkipped(t, "b", "not taken")
}
