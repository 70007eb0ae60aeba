package local

import (
	"cmp"
	"io"
	"slices"
	"strings"

	"github.com/manifoldflow/manifold/internal/credential"
)

// mask is what a redactor writes in place of a secret value.
const mask = "***"

// minSecret is the length below which a value is not masked: masking every "1"
// or "on" of a step's output would hide more of the output than of the secret.
const minSecret = 4

// A redactor masks a step's secret values in what the runner writes of the step:
// its logs, the lines it shows, and the error recorded in state.json; the lines
// and the error also lose what looks like a credential (credential.Redact). The values
// are those the step gets from Secrets (sdk.SecretEnv, read from this environment)
// and plain values that look like credentials.
type redactor struct {
	// values are the secrets, longest first, so that a secret holding another is
	// masked whole.
	values []string
}

// newRedactor returns a redactor of values, or nil when none is long enough to
// mask; a nil redactor changes nothing.
func newRedactor(values []string) *redactor {
	var keep []string
	for _, v := range values {
		if len(v) >= minSecret && !slices.Contains(keep, v) {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	slices.SortFunc(keep, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return &redactor{values: keep}
}

// string returns a whole line or message s with every secret masked, and then
// what looks like a credential withheld (credential.Redact, the rule of every
// output), which a nil redactor does too.
func (r *redactor) string(s string) string {
	return credential.Redact("", r.mask(s))
}

// mask returns s with every secret masked: what a log writes, which is cut
// anywhere, so that only the values themselves can be told in it.
func (r *redactor) mask(s string) string {
	if r == nil {
		return s
	}
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, mask)
	}
	return s
}

// err returns err with its message masked, err itself when it holds no secret.
func (r *redactor) err(err error) error {
	if err == nil {
		return err
	}
	if msg := r.string(err.Error()); msg != err.Error() {
		return maskedError{msg: msg, err: err}
	}
	return err
}

// maskedError is an error whose message lost its secrets; Unwrap still reaches
// the original, for errors.Is.
type maskedError struct {
	msg string
	err error
}

func (e maskedError) Error() string { return e.msg }
func (e maskedError) Unwrap() error { return e.err }

// writer returns a writer that masks the secrets of what it passes on to w. A
// secret split across two writes is masked too: the writer holds back the end
// of a write that could begin a secret until the next write, or Flush, tells.
func (r *redactor) writer(w io.Writer) *maskWriter { return &maskWriter{r: r, w: w} }

// maskWriter is a redactor's writer.
type maskWriter struct {
	r    *redactor
	w    io.Writer
	held string
}

// Write masks p, with what the last write held back, and passes on all but the
// end that could begin a secret. It reports len(p) written once w took the rest.
func (m *maskWriter) Write(p []byte) (int, error) {
	if m.r == nil {
		return m.w.Write(p)
	}
	s := m.held + string(p)
	cut := m.r.cut(s)
	m.held = s[cut:]
	if _, err := io.WriteString(m.w, m.r.mask(s[:cut])); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush passes on, masked, what the writer holds back: the output ended, so it
// is no secret's beginning.
func (m *maskWriter) Flush() error {
	if m.held == "" {
		return nil
	}
	_, err := io.WriteString(m.w, m.r.mask(m.held))
	m.held = ""
	return err
}

// cut returns where output s may be cut, all before it masked and passed on:
// before the longest end of s that begins a secret, and through no secret.
func (r *redactor) cut(s string) int {
	cut := len(s) - r.partial(s)
	for moved := true; moved; {
		moved = false
		for _, v := range r.values {
			for i := max(0, cut-len(v)+1); i < cut; i++ {
				if strings.HasPrefix(s[i:], v) {
					cut, moved = i, true
					break
				}
			}
		}
	}
	return cut
}

// partial returns the length of the longest end of s that is the beginning of a
// secret, which the next write may complete.
func (r *redactor) partial(s string) int {
	for n := min(len(s), len(r.values[0])-1); n > 0; n-- {
		for _, v := range r.values {
			if strings.HasPrefix(v, s[len(s)-n:]) {
				return n
			}
		}
	}
	return 0
}
