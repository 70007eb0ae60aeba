package local

import (
	"testing"
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
