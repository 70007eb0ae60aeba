package benchenv

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type recorder struct{ failed string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestInt(t *testing.T) {
	const name = "MANIFOLD_BENCHENV_TEST_INT"
	for _, c := range []struct {
		value string
		want  int
		fail  string
	}{
		{"", 7, ""},
		{"12", 12, ""},
		{"0", 0, ""},
		{"-1", 7, `MANIFOLD_BENCHENV_TEST_INT="-1": want a whole number of at least 0`},
		{"ten", 7, `MANIFOLD_BENCHENV_TEST_INT="ten": want a whole number of at least 0`},
	} {
		t.Setenv(name, c.value)
		var r recorder
		if got := Int(&r, name, 7, 0); got != c.want || r.failed != c.fail {
			t.Errorf("Int with %q = %d, failed %q; want %d, failed %q", c.value, got, r.failed, c.want, c.fail)
		}
	}
}

func TestDuration(t *testing.T) {
	const name = "MANIFOLD_BENCHENV_TEST_DURATION"
	for _, c := range []struct {
		value string
		want  time.Duration
		fails bool
	}{
		{"", time.Second, false},
		{"90s", 90 * time.Second, false},
		{"0s", time.Second, true},
		{"soon", time.Second, true},
	} {
		t.Setenv(name, c.value)
		var r recorder
		got := Duration(&r, name, time.Second)
		if got != c.want || (r.failed != "") != c.fails {
			t.Errorf("Duration with %q = %v, failed %q; want %v, fails %v", c.value, got, r.failed, c.want, c.fails)
		}
		if c.fails && !strings.HasPrefix(r.failed, name+"=") {
			t.Errorf("the failure %q does not name %s", r.failed, name)
		}
	}
}
