package local

import (
	"testing"
)

// TestExpand checks expand's lookup in vars: a defined name, one defined as
// empty (replaced) and one not defined (kept). The kubelet's rule itself is
// internal/expansion's, tested there.
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "apple", "EMPTY": ""}
	for _, tt := range []struct{ in, want string }{
		{"x$(A)y", "xappley"},
		{"a$(EMPTY)b", "ab"},
		{"$(MISSING)", "$(MISSING)"},
	} {
		if got := expand(tt.in, vars); got != tt.want {
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
