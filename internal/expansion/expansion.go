// Package expansion is the kubelet's expansion of $(NAME) references in a
// container's command, arguments and variables, written once for everything
// that must read a value as the kubelet will: the local runtime, which runs a
// step as its pod would, and the lint that finds a step's variables in a
// shell's script.
package expansion

import (
	"strings"
	"unicode/utf8"
)

// Expand returns s with each $(NAME) replaced as the kubelet replaces it
// (k8s.io/kubernetes third_party/forked/golang/expansion): by mapping's value
// when mapping has NAME, else kept as written; $$ becomes $; a "$(" without a
// ")" after it is kept, and so is a $ before any other rune (the kubelet reads
// that rune, so a byte that is not UTF-8 after a $ becomes U+FFFD).
func Expand(s string, mapping func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := mapping(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			r, size := utf8.DecodeRuneInString(s[i+1:])
			b.WriteString("$" + string(r))
			i += size
		}
	}
	return b.String()
}

// References returns the names of the $(NAME) references in s that the
// kubelet reads as references (not those escaped as $$(NAME)), in order, each
// once.
func References(s string) []string {
	var names []string
	seen := map[string]bool{}
	Expand(s, func(name string) (string, bool) {
		if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
		return "", false
	})
	return names
}
