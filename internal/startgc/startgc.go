// Package startgc keeps a flow program's start free of garbage collection.
//
// Go collects for the first time once the heap reaches its minimum, 4 MB at
// the default GOGC=100, and starts that collection before the heap gets
// there. The package initialisers of a flow program allocate nearly that much
// (2.8 MB, most of it kept), so every start of it (`--help`, `validate`, a
// local step) began with a collection that found little to free. Imported, this package raises GOGC to
// StartPercent until the first collection (a heap minimum of 16 MB) and then
// puts back the setting Go had, or the one a command chose with Then; a
// process that never reaches 16 MB never collects. Where GOGC is set in the
// environment, the package changes nothing. GOMEMLIMIT, where set, still
// bounds the heap before the first collection as after it.
//
// The package initialises early: Go initialises packages in the order of
// their import paths wherever their imports allow, and this one imports only
// the runtime and os, so it runs before the Kubernetes, Argo and AWS
// packages (k8s.io/…, sigs.k8s.io/…, go.opentelemetry.io/… sort after it).
package startgc

import (
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// StartPercent is GOGC from the program's start to its first collection.
const StartPercent = 400

var state struct {
	sync.Mutex
	// pending is whether the first collection has yet to put back then.
	pending bool
	// then is GOGC from the first collection on.
	then int
}

func init() {
	if os.Getenv("GOGC") != "" {
		return
	}
	state.pending = true
	state.then = debug.SetGCPercent(StartPercent)
	// The pointer is unreachable at once: its cleanup runs after the first
	// collection that completes.
	runtime.AddCleanup(new(*byte), func(struct{}) { collected() }, struct{}{})
}

// collected puts back GOGC after the first collection, unless Set has
// already chosen it.
func collected() {
	state.Lock()
	defer state.Unlock()
	if state.pending {
		state.pending = false
		debug.SetGCPercent(state.then)
	}
}

// Then makes GOGC percent from the first collection on, or at once if it has
// run, unless GOGC is set in the environment: a command that keeps most of
// what it allocates (a compile's plan) collects more often than Go's default,
// but not before its start's garbage is worth collecting.
func Then(percent int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	state.Lock()
	defer state.Unlock()
	if state.pending {
		state.then = percent
		return
	}
	debug.SetGCPercent(percent)
}

// Set makes GOGC percent at once, in place of what the start or Then would
// set after the first collection, unless GOGC is set in the environment.
func Set(percent int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	state.Lock()
	defer state.Unlock()
	state.pending = false
	debug.SetGCPercent(percent)
}
