package startgc

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// gcPercent returns GOGC as the program set it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// collectUntil collects until GOGC is want (the cleanup that puts it back
// runs on its own goroutine after a collection), for at most 10 s, and
// returns GOGC.
func collectUntil(want int) int {
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != want && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	return gcPercent()
}

// cases run in a new process each (TestStart starts them), since what they
// check is what the package's initialiser did before the first collection.
var cases = map[string]func() error{
	// Go's setting comes back after the first collection.
	"default": func() error {
		if got := gcPercent(); got != StartPercent {
			return fmt.Errorf("at the start GOGC=%d, want %d", got, StartPercent)
		}
		if got := collectUntil(100); got != 100 {
			return fmt.Errorf("after collections GOGC=%d, want Go's 100 back", got)
		}
		return nil
	},
	// Then waits for the first collection, and takes effect at once after it.
	"then": func() error {
		Then(50)
		if got := gcPercent(); got != StartPercent {
			return fmt.Errorf("Then(50) before the first collection: GOGC=%d, want %d until it", got, StartPercent)
		}
		if got := collectUntil(50); got != 50 {
			return fmt.Errorf("after collections GOGC=%d, want Then's 50", got)
		}
		Then(70)
		if got := gcPercent(); got != 70 {
			return fmt.Errorf("Then(70) after the first collection: GOGC=%d, want 70 at once", got)
		}
		return nil
	},
	// Set takes effect at once and the first collection leaves it.
	"set": func() error {
		Then(50)
		Set(300)
		if got := gcPercent(); got != 300 {
			return fmt.Errorf("Set(300): GOGC=%d, want 300", got)
		}
		for range 3 {
			runtime.GC()
		}
		time.Sleep(50 * time.Millisecond)
		if got := gcPercent(); got != 300 {
			return fmt.Errorf("after collections GOGC=%d, want Set's 300 kept", got)
		}
		return nil
	},
	// GOGC in the environment is the user's: nothing changes it.
	"environment": func() error {
		if got := gcPercent(); got != 80 {
			return fmt.Errorf("GOGC=80 in the environment: GOGC=%d at the start", got)
		}
		Then(50)
		Set(300)
		runtime.GC()
		if got := gcPercent(); got != 80 {
			return fmt.Errorf("GOGC=80 in the environment: Then and Set made it %d", got)
		}
		return nil
	},
}

// TestMain runs the case STARTGC_CASE names, in the process TestStart
// started for it, or else the tests.
func TestMain(m *testing.M) {
	if name := os.Getenv("STARTGC_CASE"); name != "" {
		if err := cases[name](); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Println("case passed")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestStart runs each case in a process of its own, GOGC unset but for the
// environment case.
func TestStart(t *testing.T) {
	for name := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0])
			env := []string{"STARTGC_CASE=" + name}
			if name == "environment" {
				env = append(env, "GOGC=80")
			}
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "GOGC=") {
					env = append(env, kv)
				}
			}
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err != nil || string(out) != "case passed\n" {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}
