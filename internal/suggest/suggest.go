// Package suggest picks, for a name nothing has (a step, a param, a
// manifold.toml key), the one that was most likely meant, so that an error can
// say "did you mean".
package suggest

import (
	"strings"

	"github.com/xrash/smetrics"
)

// minScore is the least Jaro-Winkler similarity of a suggestion: below it a
// candidate shares too little with the word to be what was meant.
const minScore = 0.8

// Closest returns the candidate nearest to word by Jaro-Winkler similarity
// (ignoring case; boost threshold 0.7 over a prefix of 4, as urfave/cli ranks
// its own suggestions), the first of equally near ones, and whether it is near
// enough to suggest.
func Closest(word string, candidates []string) (string, bool) {
	w := strings.ToLower(word)
	best, bestScore := "", -1.0
	for _, c := range candidates {
		if score := smetrics.JaroWinkler(w, strings.ToLower(c), 0.7, 4); score > bestScore {
			best, bestScore = c, score
		}
	}
	if word == "" || bestScore < minScore {
		return "", false
	}
	return best, true
}

// DidYouMean returns "; did you mean C?" for the candidate Closest finds, to
// end an error message with, or "".
func DidYouMean(word string, candidates []string) string {
	c, ok := Closest(word, candidates)
	if !ok {
		return ""
	}
	return "; did you mean " + c + "?"
}
