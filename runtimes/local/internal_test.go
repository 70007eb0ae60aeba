package local

import (
	"testing"
	"time"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "apple", "B": "$(A)", "EMPTY": ""}
	for _, tt := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "apple"},
		{"x$(A)y$(A)z", "xappleyapplez"},
		{"$(B)", "$(A)"}, // values are not expanded again
		{"a$(EMPTY)b", "ab"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$apple"},
		{"$$$$", "$$"},
		{"$A ${A} $", "$A ${A} $"},
		{"$(A", "$(A"},
		{"$($(A)", "$($(A)"},
		{"$(A)$(", "apple$("},
		{"€$(A)€$", "€apple€$"},
		{"$(a b)", "$(a b)"},
	} {
		if got := expand(tt.in, vars); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		n    int
		want time.Duration
	}{
		{0, 1, 0},
		{0, 5, 0},
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 4, 8 * time.Second},
	} {
		if got := backoff(tt.d, tt.n); got != tt.want {
			t.Errorf("backoff(%s, %d) = %s, want %s", tt.d, tt.n, got, tt.want)
		}
	}
	if got := backoff(time.Hour, 1000); got <= 0 {
		t.Errorf("backoff overflows: %s", got)
	}
}
