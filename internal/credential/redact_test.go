package credential

import (
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"
)

// TestRedact: every credential in a text is withheld, and the rest of the text
// is kept; a URL's password is written as url.URL.Redacted writes it.
func TestRedact(t *testing.T) {
	u, _ := url.Parse("http://admin:s3cr3t-pw@airflow.internal:8080/base")
	for _, tc := range []struct {
		name, in string
		// gone must not be in the result, kept must.
		gone, kept []string
	}{
		{in: `Get "http://admin:s3cr3t-pw@airflow.internal:8080/base": refused`, gone: []string{"s3cr3t-pw"}, kept: []string{u.Redacted(), "refused"}},
		{in: "keys " + fakeKeyID + " " + fakeTempID + " end", gone: []string{fakeKeyID, fakeTempID}, kept: []string{"keys AKIA… (withheld) ASIA… (withheld) end"}},
		{in: fakeJWT, gone: []string{fakeJWT}, kept: []string{"eyJ… (withheld)"}},
		{in: "header Authorization: Bearer abc.def-ghi_jkl0 sent", gone: []string{"abc.def-ghi_jkl0"}, kept: []string{"sent"}},
		{in: "key:\n" + fakePEM + "\nafter", gone: []string{"MIIEowIBAAKCAQEA"}, kept: []string{"-----BEGIN RSA PRIVATE KEY-----", "after"}},
		{in: "token " + fakeGitHub, gone: []string{fakeGitHub}, kept: []string{"token ghp_… (withheld)"}},
		{name: "HF_TOKEN", in: "AbCdEfGhIjKlMnOpQrStUv0123", gone: []string{"AbCdEfGhIjKlMnOpQrStUv0123"}, kept: []string{"(withheld)"}},
		// Near misses stay as they are.
		{in: "http://airflow.internal:8080/api/v2/dags/d", kept: []string{"http://airflow.internal:8080/api/v2/dags/d"}},
		{in: "sha256:3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b", kept: []string{"sha256:3b1c9e8f0a7d2c4b6e5f1a0d9c8b7a6e5f4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b"}},
		{in: "Authorization: required", kept: []string{"Authorization: required"}},
	} {
		got := Redact(tc.name, tc.in)
		for _, g := range tc.gone {
			if strings.Contains(got, g) {
				t.Errorf("Redact(%q, %q) = %q: holds %q", tc.name, tc.in, got, g)
			}
		}
		for _, k := range tc.kept {
			if !strings.Contains(got, k) {
				t.Errorf("Redact(%q, %q) = %q: lost %q", tc.name, tc.in, got, k)
			}
		}
		if again := Redact(tc.name, got); again != got {
			t.Errorf("Redact(%q) = %q: not redacted once and for all", got, again)
		}
	}
}

// TestRedactError: the message is redacted and the error still unwraps.
func TestRedactError(t *testing.T) {
	err := RedactError(&fs.PathError{Op: "open", Path: "https://u:s3cr3t-pw@h/x", Err: fs.ErrNotExist})
	if strings.Contains(err.Error(), "s3cr3t-pw") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RedactError = %v (is ErrNotExist: %v)", err, errors.Is(err, fs.ErrNotExist))
	}
	plain := errors.New("plain")
	if RedactError(plain) != plain {
		t.Error("RedactError changed an error that holds no credential")
	}
}

// TestSameOrigin: scheme, host and port make the origin.
func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://h:8080/a", "http://h:8080/b", true},
		{"http://h/a", "http://H:80/b", true},
		{"https://h/a", "https://h:443/b", true},
		{"http://h:8080/a", "http://h:8081/a", false},
		{"https://h/a", "http://h/a", false},
		{"https://h:8080/a", "http://h:8080/a", false},
		{"http://h/a", "http://sub.h/a", false},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := SameOrigin(a, b); got != tc.same {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
