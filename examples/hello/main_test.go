package main

import (
	"testing"

	"github.com/manifoldflow/manifold/flowtest"
)

// TestHello runs the flow as `hello run --param name=manifold` would: greet and
// shout in this process, echo as the shell command it is.
func TestHello(t *testing.T) {
	run := flowtest.Run(t, flow, flowtest.Params("name=manifold"), flowtest.Exec("echo"))
	run.WantSuccess(t)
	run.WantRan(t, "greet", "shout", "echo")
	if got := flowtest.Artifact[string](t, run, "greet", "greeting"); got != "hello, manifold" {
		t.Errorf("greeting = %q, want %q", got, "hello, manifold")
	}
	if got := flowtest.Artifact[string](t, run, "shout", "shout"); got != "HELLO, MANIFOLD!" {
		t.Errorf("shout = %q, want %q", got, "HELLO, MANIFOLD!")
	}
	// The Command step's shell reads the param from its variable.
	if got, want := run.Stdout("echo"), "hello, manifold, from a Command step\n"; got != want {
		t.Errorf("echo printed %q, want %q", got, want)
	}
}

// TestHelloDefault stubs the Command step: the test needs no shell, and sees
// the command line the step would have run and the param's default in its
// variable.
func TestHelloDefault(t *testing.T) {
	var call *flowtest.Call
	run := flowtest.Run(t, flow, flowtest.Stub("echo", func(c *flowtest.Call) error {
		call = c
		return nil
	}))
	run.WantSuccess(t)
	if got := flowtest.Artifact[string](t, run, "shout", "shout"); got != "HELLO, WORLD!" {
		t.Errorf("shout = %q, want %q", got, "HELLO, WORLD!")
	}
	if want := "echo \"hello, $MANIFOLD_PARAM_NAME, from a Command step\""; len(call.Argv) != 3 || call.Argv[2] != want {
		t.Errorf("echo would run %q, want sh -c %q", call.Argv, want)
	}
	if got := call.Env["MANIFOLD_PARAM_NAME"]; got != "world" {
		t.Errorf("MANIFOLD_PARAM_NAME = %q, want %q", got, "world")
	}
}
