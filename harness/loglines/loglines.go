// Package loglines helps the tests of the runtimes that stream pod logs: it
// puts back together the lines delivered in pieces (display.MaxLine) and
// shortens long lines for a test's message.
package loglines

import (
	"strconv"
	"strings"

	"github.com/manifoldflow/manifold/runtimes/display"
)

// Joined puts back together the lines that StreamLog delivered in pieces.
func Joined(pieces []string) []string {
	var lines []string
	for _, p := range pieces {
		if text, cont := strings.CutPrefix(p, display.Continues); cont && len(lines) > 0 {
			lines[len(lines)-1] += text
		} else {
			lines = append(lines, p)
		}
	}
	return lines
}

// Short returns s, or when it is long its start and end around its length.
func Short(s string) string {
	if len(s) > 40 {
		return s[:20] + "…(" + strconv.Itoa(len(s)) + " bytes)…" + s[len(s)-20:]
	}
	return s
}
