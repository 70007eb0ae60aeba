package expansion

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

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
