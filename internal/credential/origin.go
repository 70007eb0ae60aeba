package credential

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// SameOrigin reports whether a and b have one origin: the same scheme, host and
// port (the scheme's own port when none is written), as browsers scope what a
// site may read. Another port of the same host, and http in place of https, are
// other origins.
func SameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// maxRedirects is how many redirects CheckRedirect follows, as net/http's own
// policy does.
const maxRedirects = 10

// CheckRedirect is an http.Client's CheckRedirect for a client that sends
// credentials (a password in a body, an Authorization header): it follows a
// redirect within the origin of the first request and refuses, with a
// RedirectError, one to another origin. net/http keeps a 307's or 308's body
// and an Authorization header for another port of the same host and from https
// down to http; refusing is what keeps them from there.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) == 0 {
		return nil
	}
	first := via[0]
	if !SameOrigin(first.URL, req.URL) {
		return &RedirectError{Method: first.Method, From: via[len(via)-1].URL.Redacted(), To: req.URL.Redacted()}
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("%s %s: stopped after %d redirects", first.Method, first.URL.Redacted(), maxRedirects)
	}
	return nil
}

// A RedirectError is a redirect that CheckRedirect refused: from one origin to
// another.
type RedirectError struct {
	// Method is the request's; From the URL that redirected, To where to.
	Method, From, To string
}

func (e *RedirectError) Error() string {
	return fmt.Sprintf("%s %s was redirected to %s, another origin: not followed, as credentials never leave their origin; if the server moved, give its new URL", e.Method, e.From, e.To)
}
