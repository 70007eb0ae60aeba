package local

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRedactorString(t *testing.T) {
	r := newRedactor([]string{"s3cr3t-value", "s3cr3t", "", "abc", "s3cr3t"})
	for in, want := range map[string]string{
		"token=s3cr3t-value.":  "token=***.",
		"s3cr3ts3cr3t":         "******",
		"abc is too short":     "abc is too short",
		"nothing to hide here": "nothing to hide here",
	} {
		if got := r.string(in); got != want {
			t.Errorf("string(%q) = %q, want %q", in, got, want)
		}
	}
	var none *redactor
	if got := none.string("s3cr3t"); got != "s3cr3t" {
		t.Errorf("a nil redactor changed %q to %q", "s3cr3t", got)
	}
	if newRedactor([]string{"", "ab"}) != nil {
		t.Error("a redactor of values too short to mask is not nil")
	}
}

// TestMaskWriter: a secret is masked however the output is cut into writes.
func TestMaskWriter(t *testing.T) {
	const secret, short = "AKIA" + "Z7Q4M2XK9PLR3TWB", "AKIAZ7"
	out := "key " + secret + " and again " + secret + "\nAKIA is not a secret, nor A, but " + short + " is\nthe end " + secret
	want := strings.ReplaceAll(strings.ReplaceAll(out, secret, mask), short, mask)
	r := newRedactor([]string{short, secret})
	for size := 1; size <= len(out); size++ {
		var b bytes.Buffer
		w := r.writer(&b)
		for i := 0; i < len(out); i += size {
			chunk := out[i:min(i+size, len(out))]
			if n, err := w.Write([]byte(chunk)); n != len(chunk) || err != nil {
				t.Fatalf("size %d: Write = %d, %v", size, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if b.String() != want {
			t.Errorf("writes of %d bytes: got %q, want %q", size, b.String(), want)
		}
	}
	var b bytes.Buffer
	w := (*redactor)(nil).writer(&b)
	_, _ = w.Write([]byte(secret))
	_ = w.Flush()
	if b.String() != secret {
		t.Errorf("a nil redactor's writer wrote %q", b.String())
	}
}

func TestRedactorErr(t *testing.T) {
	base := errors.New(`exec: "/opt/s3cr3t-tool": no such file`)
	err := newRedactor([]string{"s3cr3t"}).err(base)
	if strings.Contains(err.Error(), "s3cr3t") || !errors.Is(err, base) {
		t.Errorf("err = %q (is the original: %v)", err, errors.Is(err, base))
	}
	if other := errors.New("exit status 1"); newRedactor([]string{"s3cr3t"}).err(other) != other {
		t.Error("an error without a secret was replaced")
	}
}
