package expansion

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestExpand holds Expand to the kubelet's expansion
// (k8s.io/kubernetes/third_party/forked/golang/expansion, expand_test.go's
// cases among these).
func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "apple", "B": "$(A)", "EMPTY": "", "VAR_A": "A"}
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
		{"foo$(VAR_A)bar", "fooAbar"},
		{"$)", "$)"},
		{"$(VAR_A)$$(VAR_A)", "A$(VAR_A)"},
		// The kubelet reads the rune after a $ that starts nothing: a byte
		// that is not UTF-8 there becomes U+FFFD.
		{"$é", "$é"},
		{"$é$(A)", "$éapple"},
		{"$\xff", "$\uFFFD"},
		{"\xff$(A)", "\xffapple"},
	} {
		got := Expand(tt.in, func(name string) (string, bool) {
			v, ok := vars[name]
			return v, ok
		})
		if got != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestReferences(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"plain", nil},
		{`echo "$(A), $(B)" $(A)`, []string{"A", "B"}},
		{"$$(A) $$$(B)", []string{"B"}},
		{"$A ${A} $ $(A", nil},
		{"$($(A)", []string{"$(A"}},
		{"$(a b)", []string{"a b"}},
	} {
		if diff := cmp.Diff(tt.want, References(tt.in), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("References(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}
