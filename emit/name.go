package emit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
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
