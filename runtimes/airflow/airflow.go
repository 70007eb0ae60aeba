// Package airflow deploys a flow's DAG to Airflow 3 and runs it there, through
// Airflow's stable REST API v2 (/api/v2) and the token endpoint of its auth
// manager (/auth/token).
//
// Deploy writes the two files the airflow target emits (package emit/airflow),
// <flow>.kpo.json then <flow>.py, into the DAG processor's dags folder, each
// through a temporary file in the same folder whose name does not end in .py
// (which the DAG processor never reads), synced and renamed into place
// (package internal/atomicfile): Airflow
// parses the old DAG file or the new one, never half of one. WaitParsed waits
// until the DAG processor has stored the new file, or returns the import error
// it reported for it. Trigger starts a DAG run with the flow's params as its
// conf, Follow follows it into a runtimes/dag run (the live view, the record
// under .manifold/runs/<run id>/ and the trace every runtime shares), and Stop,
// Clear and Log act on a run as Airflow's UI does. In a dynamic flow, Follow
// reads the values that a fan-out or a branch is decided on from the tasks'
// XComs, so the dag core makes a unit for each mapped task instance of a
// fan-out and records a branch not taken as Airflow skipped it, in its own
// words.
//
// The REST API has no watch: Follow polls, with a backoff from PollMin to
// PollMax while nothing changes, and it is the only part that polls.
//
// Credentials are never flags: a token (EnvToken), or a user and password
// (EnvUsername, EnvPassword) exchanged for one at /auth/token, from the
// environment or from the config file (ConfigPath).
package airflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/manifoldflow/manifold/internal/credential"
)

// The environment that configures a Client; each overrides the config file.
const (
	EnvURL      = "MANIFOLD_AIRFLOW_URL"
	EnvToken    = "MANIFOLD_AIRFLOW_TOKEN"
	EnvUsername = "MANIFOLD_AIRFLOW_USERNAME"
	EnvPassword = "MANIFOLD_AIRFLOW_PASSWORD"
	// EnvConfig names the config file in place of ConfigPath's default.
	EnvConfig = "MANIFOLD_AIRFLOW_CONFIG"
)

// Config says which Airflow to reach and how to sign in. It is read from the
// config file (ConfigPath), a TOML file of these keys:
//
//	url = "http://airflow.example.com:8080"
//	dags_folder = "/mnt/airflow/dags"
//	token = "..."            # or:
//	username = "manifold"
//	password = "..."
//
// and then the environment (EnvURL, EnvToken, EnvUsername, EnvPassword)
// overrides it.
type Config struct {
	// URL is the API server's base URL, without /api/v2.
	URL string `toml:"url"`
	// DagsFolder is the dags folder of Airflow's DAG processor, as this machine
	// reaches it (a mounted volume, say).
	DagsFolder string `toml:"dags_folder"`
	// Token is a bearer token for the API; without it, Username and Password
	// are exchanged for one.
	Token    string `toml:"token"`
	Username string `toml:"username"`
	Password string `toml:"password"`
}

// ConfigPath returns the config file: EnvConfig's value, else
// $XDG_CONFIG_HOME/manifold/airflow.toml (~/.config/manifold/airflow.toml).
func ConfigPath() string {
	if p := os.Getenv(EnvConfig); p != "" {
		return p
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "manifold", "airflow.toml")
}

// LoadConfig reads the config file at path (none when it does not exist and
// path is ConfigPath's default) and lays the environment over it.
func LoadConfig(path string) (Config, error) {
	var c Config
	if path != "" {
		md, err := toml.DecodeFile(path, &c)
		switch {
		case errors.Is(err, os.ErrNotExist) && os.Getenv(EnvConfig) == "":
		case err != nil:
			return c, fmt.Errorf("airflow config %s: %w", path, err)
		default:
			if und := md.Undecoded(); len(und) > 0 {
				return c, fmt.Errorf("airflow config %s: unknown key %s (the keys are url, dags_folder, token, username, password)", path, und[0])
			}
			if c.Token != "" || c.Password != "" {
				if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
					return c, fmt.Errorf("airflow config %s holds a credential and others can read it (mode %v): chmod 600 %s", path, fi.Mode().Perm(), path)
				}
			}
		}
	}
	for _, e := range []struct {
		name string
		to   *string
	}{{EnvURL, &c.URL}, {EnvToken, &c.Token}, {EnvUsername, &c.Username}, {EnvPassword, &c.Password}} {
		if v := os.Getenv(e.name); v != "" {
			*e.to = v
		}
	}
	return c, nil
}

// Client calls one Airflow's REST API.
type Client struct {
	base *url.URL
	cfg  Config
	http *http.Client

	mu    sync.Mutex
	token string
}

// New returns a client of the Airflow at cfg.URL. It signs in on its first
// request.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, fmt.Errorf("no Airflow URL: give --airflow-url, set %s, or put url in %s", EnvURL, ConfigPath())
	}
	u, err := url.Parse(strings.TrimSuffix(cfg.URL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("Airflow URL %q: give the API server's http:// or https:// address, such as http://localhost:8080", credential.Redact("", cfg.URL))
	}
	// A user and password in the URL (http://user:password@host) sign in, unless
	// others are given; the client's URL, which errors, the display and the
	// run's record print, holds neither.
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && cfg.Token == "" && cfg.Username == "" && cfg.Password == "" {
			cfg.Username, cfg.Password = u.User.Username(), pw
		}
		u.User = nil
	}
	if cfg.Token == "" && (cfg.Username == "" || cfg.Password == "") {
		return nil, fmt.Errorf("no Airflow credentials: set %s, or %s and %s, or put them in %s", EnvToken, EnvUsername, EnvPassword, ConfigPath())
	}
	// Neither the password nor the token goes to another origin: a redirect to
	// one is refused (credential.CheckRedirect).
	hc := &http.Client{Timeout: time.Minute, CheckRedirect: credential.CheckRedirect}
	return &Client{base: u, cfg: cfg, http: hc, token: cfg.Token}, nil
}

// URL returns the API server's base URL, without a user or password.
func (c *Client) URL() string { return c.base.String() }

// APIError is an answer of the API other than success.
type APIError struct {
	Method, Path string
	Status       int
	// Detail is what the API said, its detail field when it has one.
	Detail string
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("Airflow %s %s: %s", e.Method, e.Path, http.StatusText(e.Status))
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	switch e.Status {
	case http.StatusUnauthorized:
		msg += " (check the token, or the user and password)"
	case http.StatusForbidden:
		msg += " (the user's role may not do this)"
	}
	return msg
}

// NotFound reports whether err is the API's 404.
func NotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// signIn exchanges the user and password for a token.
func (c *Client) signIn(ctx context.Context) (string, error) {
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	body := map[string]string{"username": c.cfg.Username, "password": c.cfg.Password}
	if err := c.send(ctx, http.MethodPost, "/auth/token", nil, body, &tok, ""); err != nil {
		return "", fmt.Errorf("signing in to Airflow as %s: %w", c.cfg.Username, err)
	}
	if tok.AccessToken == "" {
		return "", fmt.Errorf("signing in to Airflow as %s: no access_token in the answer", c.cfg.Username)
	}
	return tok.AccessToken, nil
}

// call makes a request of the API, signed in, decoding the JSON answer into out
// (unless nil). A token that has expired is renewed once, when the client has a
// user and password.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	for renewed := false; ; renewed = true {
		c.mu.Lock()
		tok := c.token
		c.mu.Unlock()
		if tok == "" {
			var err error
			if tok, err = c.signIn(ctx); err != nil {
				return err
			}
			c.mu.Lock()
			c.token = tok
			c.mu.Unlock()
		}
		err := c.sendAgain(ctx, method, path, query, body, out, tok)
		var ae *APIError
		if renewed || c.cfg.Password == "" || !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			return err
		}
		c.mu.Lock()
		c.token = ""
		c.mu.Unlock()
	}
}

// writePauses are the pauses before each further try of a write that asks
// for a state rather than an action (PATCH, PUT, DELETE: marking a run
// failed, pausing a DAG), made again when the API answers it with a server
// error (500, 502, 503, 504). Airflow answers 500 ("Database error") while
// its metadata database is locked by its other components (SQLite's lock, a
// Postgres failover), which passes; a run the user asked to stop is not left
// running for that. Reads are not tried again here: a follower rides out an
// API that does not answer, and says so.
var writePauses = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}

// sendAgain is send, made again after each of writePauses while a write that
// is the same when made twice gets a server error and ctx lasts.
func (c *Client) sendAgain(ctx context.Context, method, path string, query url.Values, body, out any, token string) error {
	for i := 0; ; i++ {
		err := c.send(ctx, method, path, query, body, out, token)
		var ae *APIError
		if i == len(writePauses) || !errors.As(err, &ae) || !serverError(ae.Status) ||
			(method != http.MethodPatch && method != http.MethodPut && method != http.MethodDelete) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(writePauses[i]):
		}
	}
}

// serverError reports whether status is a server's error that may pass.
func serverError(status int) bool {
	switch status {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// send makes one request of the API: method on path (escaped, as path makes
// it) with query and body (JSON, unless nil), decoding the JSON answer into out
// (unless nil). Its errors hold no credential (credential.RedactError).
func (c *Client) send(ctx context.Context, method, path string, query url.Values, body, out any, token string) error {
	return credential.RedactError(c.sendRaw(ctx, method, path, query, body, out, token))
}

func (c *Client) sendRaw(ctx context.Context, method, path string, query url.Values, body, out any, token string) error {
	u := *c.base
	// RawPath keeps each segment's escapes as path wrote them (a / inside a
	// run ID stays %2F); Path is the same path unescaped, as url.URL wants.
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	raw, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return fmt.Errorf("Airflow %s %s: %w", method, path, err)
	}
	u.Path = raw
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	var re *credential.RedirectError
	if errors.As(err, &re) {
		return fmt.Errorf("Airflow at %s: %w", c.base, re)
	}
	if err != nil {
		return fmt.Errorf("Airflow at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("Airflow %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Detail: detail(data)}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("Airflow %s %s: reading the answer: %w", method, path, err)
	}
	return nil
}

// detail is the message of an error answer: FastAPI's detail, a string or a
// structure, else the body itself, shortened.
func detail(data []byte) string {
	var e struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Detail) > 0 {
		var s string
		if json.Unmarshal(e.Detail, &s) == nil {
			return s
		}
		data = e.Detail
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// path joins the segments of an API path, escaping each (a / within one too),
// as send takes it.
func path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/api/v2")
	for _, s := range segments {
		b.WriteByte('/')
		// A + is escaped too: some servers and proxies read it as a space, and
		// Airflow's own run IDs hold one (manual__2026-01-01T00:00:00+00:00).
		b.WriteString(strings.ReplaceAll(url.PathEscape(s), "+", "%2B"))
	}
	return b.String()
}
