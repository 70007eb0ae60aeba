package credential

import "strings"

// Redact returns s as every output prints it (the terminal, run records,
// traces, errors): each credential in it withheld. Of a credential of a known
// shape, the prefix that every credential of the kind shares stays and the rest
// becomes "… (withheld)" ("AKIA… (withheld)", "Bearer … (withheld)"); a URL's
// password becomes xxxxx, as url.URL.Redacted writes it. name is the variable,
// flag or param that s is the value of, "" for none (a foreach item, a message):
// under a secret's name (HF_TOKEN), a key-like value is withheld whole.
func Redact(name, s string) string {
	if c, ok := detectByName(name, s); ok {
		if _, shaped := detectShape(s); !shaped {
			return c.Withheld()
		}
	}
	if len(s) < minShape || !hinted(s) {
		return s
	}
	for _, shape := range credentialShapes() {
		// A match's boundary may be the next one's: go again until nothing
		// changes, each pass withholding what the one before left.
		for range 8 {
			next := shape.redact(s)
			if next == s {
				break
			}
			s = next
		}
	}
	return s
}

// redact withholds the secret of each of the shape's matches in s.
func (shape credentialShape) redact(s string) string {
	mask := shape.mask
	if mask == "" {
		mask = "… (withheld)"
	}
	var b strings.Builder
	last := 0
	for _, m := range shape.re.FindAllStringSubmatchIndex(s, -1) {
		if g := shape.literal; g > 0 && !literal(s[m[2*g]:m[2*g+1]]) {
			continue
		}
		start, end := m[2*shape.secret], m[2*shape.secret+1]
		// Withheld already (a PEM block withheld to the end of the text begins
		// with its mask).
		if secret := s[start:end]; secret == mask || shape.mask == "" && strings.HasPrefix(secret, mask) {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(mask)
		last = end
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// RedactError returns err with its message redacted (Redact), err itself when
// its message holds no credential. errors.Is and errors.As still reach err
// through the result.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if red := Redact("", msg); red != msg {
		return &redactedError{msg: red, err: err}
	}
	return err
}

// redactedError is an error whose message lost its credentials.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
