package emit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/manifoldflow/manifold/plan"
)

// MaxNameLength is the longest object name every target can use: a DNS-1123
// label, which is also what Kubernetes allows for label values such as job-name.
const MaxNameLength = 63

// Name joins parts with "-" into an object name of at most max characters. A name
// that would be longer keeps its start and ends in a hash of the whole, so distinct
// inputs never share a name and the same input always gets the same one.
func Name(max int, parts ...string) string {
	full := strings.Join(parts, "-")
	if len(full) <= max {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:])[:8]
	keep := max - len(hash) - 1
	if keep < 1 {
		return hash[:max]
	}
	return strings.TrimRight(full[:keep], "-.") + "-" + hash
}

// RunSuffixLength is the length of the suffix RunName adds for a run.
const RunSuffixLength = 6

// RunName is Name(max, parts...) for an object of flow f, with a hash of f's run
// ID as the last part when f is made for a run (f.Run), so that two runs of one
// flow never share an object name.
func RunName(f *plan.Flow, max int, parts ...string) string {
	if f.Run == "" {
		return Name(max, parts...)
	}
	sum := sha256.Sum256([]byte(f.Run))
	return Name(max, append(parts, hex.EncodeToString(sum[:])[:RunSuffixLength])...)
}
