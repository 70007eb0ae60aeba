package airflow

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/harness/testflows"
)

// seen is what a server got of the credentials: the sign-in bodies and
// Authorization headers it was sent.
type seen struct {
	mu     sync.Mutex
	bodies []string
	auths  []string
}

func (s *seen) add(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(body) > 0 {
		s.bodies = append(s.bodies, string(body))
	}
	if a := r.Header.Get("Authorization"); a != "" {
		s.auths = append(s.auths, a)
	}
}

func (s *seen) get() (bodies, auths []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies, s.auths
}

// TestNoCredentialsToAnotherOrigin: a sign-in, and a signed-in request, that
// Airflow redirects to another origin (another port of the same host, or from
// https down to http) are refused, naming both URLs, and the other origin never
// sees the password nor the token; a redirect within the origin is followed.
func TestNoCredentialsToAnotherOrigin(t *testing.T) {
	var other seen
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		other.add(r)
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "stolen", "dag_id": "d"})
	}))
	defer elsewhere.Close()

	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, tls := range []bool{false, true} {
			name := strconv.Itoa(code)
			if tls {
				name += "/https-to-http"
			}
			t.Run(name, func(t *testing.T) {
				other = seen{}
				// redirect says which paths the server redirects elsewhere.
				redirect := map[string]bool{}
				h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					switch {
					case redirect[r.URL.Path]:
						http.Redirect(w, r, elsewhere.URL+r.URL.Path, code)
					case r.URL.Path == "/auth/token":
						_ = json.NewEncoder(w).Encode(map[string]string{"access_token": "t1"})
					case r.URL.Path == "/api/v2/moved":
						// A redirect within the origin is followed.
						http.Redirect(w, r, "/api/v2/dags/d", code)
					default:
						_ = json.NewEncoder(w).Encode(map[string]any{"dag_id": "d"})
					}
				})
				var srv *httptest.Server
				if tls {
					srv = httptest.NewTLSServer(h)
				} else {
					srv = httptest.NewServer(h)
				}
				defer srv.Close()
				newClient := func(cfg Config) *Client {
					cfg.URL = srv.URL
					c, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					if tls {
						c.http.Transport = srv.Client().Transport
					}
					return c
				}

				// The sign-in is redirected.
				redirect["/auth/token"] = true
				c := newClient(Config{Username: "u", Password: "s3cret-pw"})
				_, err := c.DAG(t.Context(), "d")
				if err == nil || !strings.Contains(err.Error(), srv.URL+"/auth/token") || !strings.Contains(err.Error(), elsewhere.URL+"/auth/token") {
					t.Errorf("a sign-in redirected to %s: %v; want it refused, naming both URLs", elsewhere.URL, err)
				}
				t.Logf("%v", err)

				// A request with the token is redirected.
				redirect["/auth/token"] = false
				redirect["/api/v2/dags/d"] = true
				c = newClient(Config{Username: "u", Password: "s3cret-pw"})
				if _, err := c.DAG(t.Context(), "d"); err == nil || !strings.Contains(err.Error(), elsewhere.URL+"/api/v2/dags/d") {
					t.Errorf("a request redirected to %s: %v; want it refused, naming where", elsewhere.URL, err)
				}
				c = newClient(Config{Token: "given-token"})
				if _, err := c.DAG(t.Context(), "d"); err == nil {
					t.Errorf("a request with a given token redirected to %s was followed", elsewhere.URL)
				}
				bodies, auths := other.get()
				if len(bodies) > 0 || len(auths) > 0 {
					t.Errorf("the other origin got the sign-in bodies %q and the Authorization headers %q", bodies, auths)
				}

				// Within the origin, a redirect is followed.
				redirect["/api/v2/dags/d"] = false
				c = newClient(Config{Username: "u", Password: "s3cret-pw"})
				var d DAG
				if err := c.call(t.Context(), http.MethodGet, "/api/v2/moved", nil, nil, &d); err != nil || d.ID != "d" {
					t.Errorf("a redirect within the origin: %+v, %v; want it followed", d, err)
				}
			})
		}
	}
}

// TestPathSegments: each segment of a path reaches the server as it is, a
// space, a percent sign, a slash, a plus and a non-ASCII letter alike.
func TestPathSegments(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.URL.EscapedPath())
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"dag_run_id": "x"})
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL + "/prefix", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a b", "100%", "a/b", "manual__2026-01-01T00:00:00+00:00", "läuft", "a%2Fb"}
	var want []string
	for _, id := range ids {
		if _, err := c.Run(t.Context(), "d", id); err != nil {
			t.Fatal(err)
		}
		// What Airflow's router (Starlette) reads: each segment percent-decoded once.
		want = append(want, "/prefix/api/v2/dags/d/dagRuns/"+strings.NewReplacer("%", "%25", " ", "%20", "/", "%2F", "+", "%2B", "ä", "%C3%A4").Replace(id))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paths sent (-want +got):\n%s", diff)
	}
}

// TestFollowRefusesAPathAsRunID: a run ID that cannot name one directory
// (Airflow takes a / in one, when its allowed_run_id_pattern lets it) is
// refused before a record is written.
func TestFollowRefusesAPathAsRunID(t *testing.T) {
	c, err := New(Config{URL: "http://127.0.0.1:1", Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	f := testflows.Compile(t, flow)
	_, err = c.Follow(t.Context(), f, "deployflow", "a/../../b", FollowOptions{Root: root})
	if err == nil || !strings.Contains(err.Error(), "cannot name a directory") {
		t.Errorf("Follow of run a/../../b: %v; want it refused", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) > 0 {
		t.Errorf("Follow of run a/../../b wrote %v", entries)
	}
}
