// Package suggest finds the name a user most likely meant, for "did you mean"
// in errors about unknown commands, flags, steps, params and config keys.
//
// It ranks by the Jaro-Winkler similarity of github.com/xrash/smetrics, with
// the constants urfave/cli's own suggestions use, so that every suggestion of
// the command line agrees.
package suggest

import (
	"strings"

	"github.com/xrash/smetrics"
)

// Threshold is the least similarity, in [0, 1], at which Closest suggests a
// candidate: below it the word is too far from every candidate to be a slip.
const Threshold = 0.8

// Closest returns the candidate most similar to word, and true, when one is
// at least Threshold similar (comparing case-insensitively); else "" and
// false. A candidate equal to word is returned as well. A candidate of
// several parts (max-parallel, train.efa) is also compared by each of its
// tails (parallel, efa), so that a slip in the last word finds it. Ties go
// to the earlier candidate, so a sorted list gives a deterministic answer.
func Closest(word string, candidates []string) (string, bool) {
	best, score := "", 0.0
	w := strings.ToLower(word)
	for _, c := range candidates {
		if s := score1(w, strings.ToLower(c)); s > score {
			best, score = c, s
		}
	}
	if score < Threshold {
		return "", false
	}
	return best, true
}

// score1 is the similarity of word to candidate c or, when higher, to a tail
// of c that begins after a '-', '_' or '.'.
func score1(word, c string) float64 {
	s := Similarity(word, c)
	for i, r := range c {
		if r == '-' || r == '_' || r == '.' {
			s = max(s, Similarity(word, c[i+1:]))
		}
	}
	return s
}

// DidYouMean returns "; did you mean X?" for the candidate Closest finds,
// or "" when none is close, to append to an error message.
func DidYouMean(word string, candidates []string) string {
	if c, ok := Closest(word, candidates); ok {
		return "; did you mean " + c + "?"
	}
	return ""
}

// Similarity is the Jaro-Winkler similarity of a and b, 1 when equal and 0
// when they share nothing.
func Similarity(a, b string) float64 {
	// The boost threshold and prefix size of smetrics' documentation, which
	// urfave/cli uses too.
	const (
		boostThreshold = 0.7
		prefixSize     = 4
	)
	return smetrics.JaroWinkler(a, b, boostThreshold, prefixSize)
}

// Edits is the Levenshtein distance of a and b: the fewest insertions,
// deletions and substitutions of one character that turn a into b.
func Edits(a, b string) int { return smetrics.WagnerFischer(a, b, 1, 1, 1) }
