// Package benchenv reads the settings a benchmark takes from the environment, such
// as MANIFOLD_BENCH_ITEMS, so that every benchmark reads and refuses them alike.
package benchenv

import (
	"os"
	"strconv"
	"time"
)

// TB is the part of testing.TB these functions use.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Int returns the whole number in the variable name, or def when it is unset. A
// value that is not a whole number, or is below least, fails tb, naming the
// variable and what it wants.
func Int(tb TB, name string, def, least int) int {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		tb.Fatalf("%s=%q: want a whole number of at least %d", name, s, least)
		return def
	}
	return n
}

// Duration returns the duration in the variable name, such as 10s, or def when it
// is unset. A value that is not a positive duration fails tb.
func Duration(tb TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration such as 10s", name, s)
		return def
	}
	return d
}
