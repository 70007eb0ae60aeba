package cli

import (
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// gcPercent returns GOGC as the program set it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestCompileGC: the plan's setting (GOGC=50) comes at once in a process that
// has collected, and else after its first collection, so that a small compile
// does not start by collecting what the package initialisers left; emitGC's,
// once the plan is made, wins over one still waiting.
func TestCompileGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetGCPercent(orig)
		debug.SetMemoryLimit(math.MaxInt64)
	})

	runtime.GC()
	compileGC()
	if got := gcPercent(); got != 50 {
		t.Errorf("after a collection, compileGC set GOGC=%d, want 50", got)
	}

	debug.SetGCPercent(100)
	deferPlanGC()
	if got := gcPercent(); got != 100 {
		t.Errorf("before the next collection GOGC=%d, want 100 (unchanged)", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != 50 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if got := gcPercent(); got != 50 {
		t.Errorf("after collections for 10s GOGC=%d, want 50", got)
	}

	debug.SetGCPercent(100)
	deferPlanGC()
	emitGC()
	planGCDue() // the collection comes after the plan is made
	if got := gcPercent(); got != 400 {
		t.Errorf("emitGC, then the first collection: GOGC=%d, want emitGC's 400", got)
	}
}
