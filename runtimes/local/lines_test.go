package local

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/manifoldflow/manifold/runtimes/display"
)

// TestLongLinePieces: a line of step output longer than display.MaxLine (a
// progress bar that never ends its line), written in writes that cut its runes,
// is shown in pieces as a cluster run shows a pod's: whole runes, at most
// MaxLine bytes, each but the first beginning with display.Continues, which
// join into the line; the lines after it are shown whole.
func TestLongLinePieces(t *testing.T) {
	long := strings.Repeat("é▕█▏", 40_000)
	var pieces []string
	l := &lines{emit: func(s string) { pieces = append(pieces, s) }}
	out := []byte(long + "\nafter\n")
	for len(out) > 0 {
		n := min(len(out), 999)
		l.write(out[:n])
		out = out[n:]
	}
	l.flush()
	var joined []string
	for _, p := range pieces {
		if !utf8.ValidString(p) {
			t.Errorf("a piece cuts a rune: %.20q…", p)
		}
		if len(p) > display.MaxLine+len(display.Continues) {
			t.Errorf("a piece of %d bytes, more than %d and the mark", len(p), display.MaxLine)
		}
		if rest, ok := strings.CutPrefix(p, display.Continues); ok && len(joined) > 0 {
			joined[len(joined)-1] += rest
		} else {
			joined = append(joined, p)
		}
	}
	if len(joined) != 2 || joined[0] != long || joined[1] != "after" {
		t.Errorf("the pieces join into %d lines (of %d bytes first), want the long line of %d bytes and \"after\"", len(joined), len(joined[0]), len(long))
	}
}
