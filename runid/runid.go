// Package runid holds the one rule for run IDs. A run ID that Manifold names or
// takes from a user (run, run --kube, compile --run-id) becomes a directory of the
// run record and of the artifact store, the value of the manifold.dev/run label on
// every object of the run, and the input of the hash that ends the run's object
// names; Check says whether an ID can be all of these. A run ID that an engine
// names (an Argo workflow's name, an Airflow DAG run's id) only names a directory
// of the artifact store; CheckStore says whether it can.
package runid

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxLen is the longest run ID Check takes: a label value's limit.
const MaxLen = validation.LabelValueMaxLength

// Check says what is wrong with a run ID given by a user, or nil. It must be 1 to
// 63 letters, digits, '.', '_' or '-', beginning and ending with a letter or digit:
// a valid label value (which also makes it a safe directory name).
func Check(id string) error {
	if id == "" {
		return errors.New("the run ID is empty")
	}
	if id == Latest {
		return fmt.Errorf("run ID %q names a flow's run that started last: choose another ID", id)
	}
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
		return fmt.Errorf("run ID %q: use up to %d letters, digits, '.', '_' or '-', beginning and ending with a letter or digit (it labels the run's objects)", id, MaxLen)
	}
	return nil
}

// Latest is the run ID that commands taking the ID of a past run (runs show,
// logs, artifact get, stop, retry…) read as the flow's run that started last.
// No run is given it: Check refuses it.
const Latest = "latest"

// New returns a fresh run ID: the UTC time to the second, then random hex, so IDs
// sort by start time. It always passes Check.
func New(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Choose returns the ID of a run: given, when Check takes it, or a fresh one
// (New(now)) when given is empty.
func Choose(given string, now time.Time) (string, error) {
	if given == "" {
		return New(now), nil
	}
	if err := Check(given); err != nil {
		return "", err
	}
	return given, nil
}

// CheckStore refuses a run ID that cannot name one directory of an artifact store:
// empty, "." or "..", holding '/', '\' or a control character, or longer than 250
// bytes. Every ID Check takes passes, and so do Argo workflow names and Airflow
// run IDs (manual__2026-12-02T14:20:32.669649+00:00).
func CheckStore(id string) error {
	if id == "" {
		return errors.New("the run ID is empty")
	}
	bad := id == "." || id == ".." || len(id) > 250 || !utf8.ValidString(id) ||
		strings.ContainsFunc(id, func(r rune) bool { return r == '/' || r == '\\' || r < 0x20 || r == 0x7f })
	if bad {
		return fmt.Errorf("run ID %q cannot name a directory of the artifact store: it must be at most 250 characters, without '/', '\\\\' or control characters, and not . or ..", id)
	}
	return nil
}
