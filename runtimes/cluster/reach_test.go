package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// timeoutErr is a net.Error that timed out, as a dial or read deadline gives.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var jobsGR = schema.GroupResource{Group: "batch", Resource: "jobs"}

// TestTransient: what the API server did not answer, or could not answer now,
// is tried again; its refusals, and a request the run canceled, are not.
func TestTransient(t *testing.T) {
	refused := &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/apis/batch/v1/namespaces/x/jobs",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	cases := []struct {
		name       string
		err        error
		transient  bool
		unanswered bool
	}{
		{"nil", nil, false, false},
		{"connection refused", refused, true, true},
		{"connection reset", &url.Error{Op: "Get", URL: "u", Err: &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}, true, true},
		{"EOF", &url.Error{Op: "Get", URL: "u", Err: io.EOF}, true, true},
		{"unexpected EOF", fmt.Errorf("watch: %w", io.ErrUnexpectedEOF), true, true},
		{"http2 connection lost", errors.New("http2: client connection lost"), true, true},
		{"client timeout", &url.Error{Op: "Get", URL: "u", Err: timeoutErr{}}, true, true},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), true, false},
		{"internal error", apierrors.NewInternalError(errors.New("etcdserver: request timed out")), true, false},
		{"service unavailable", apierrors.NewServiceUnavailable("starting"), true, false},
		{"gateway timeout", apierrors.NewTimeoutError("etcd", 0), true, false},
		{"server timeout", apierrors.NewServerTimeout(jobsGR, "create", 1), true, false},
		{"not found", apierrors.NewNotFound(jobsGR, "a"), false, false},
		{"already exists", apierrors.NewAlreadyExists(jobsGR, "a"), false, false},
		{"forbidden", apierrors.NewForbidden(jobsGR, "a", errors.New("RBAC")), false, false},
		{"invalid", apierrors.NewBadRequest("bad"), false, false},
		{"conflict", apierrors.NewConflict(jobsGR, "a", errors.New("changed")), false, false},
		{"unauthorized", apierrors.NewUnauthorized("expired"), false, false},
		{"canceled", &url.Error{Op: "Get", URL: "u", Err: context.Canceled}, false, false},
		{"unknown authority", &url.Error{Op: "Get", URL: "u", Err: x509.UnknownAuthorityError{}}, false, false},
		{"other", errors.New("no kind Job is registered"), false, false},
	}
	for _, c := range cases {
		if got := transient(c.err); got != c.transient {
			t.Errorf("%s (%v): transient %v, want %v", c.name, c.err, got, c.transient)
		}
		if got := unanswered(c.err); got != c.unanswered {
			t.Errorf("%s (%v): unanswered %v, want %v", c.name, c.err, got, c.unanswered)
		}
	}
}

// said collects what a reach says.
type said struct {
	mu    sync.Mutex
	lines []string
}

func (s *said) say(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, fmt.Sprintf(format, args...))
}

func (s *said) count(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// fastReach is a reach whose delays are short, with a probe that fails while
// down is set, counting its calls.
func fastReach(limit time.Duration, down *atomic.Bool, probes *atomic.Int32) (*reach, *said) {
	r := newReach("https://sim", limit, func(context.Context) error {
		probes.Add(1)
		if down.Load() {
			return &url.Error{Op: "Get", URL: "/readyz", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
		}
		return nil
	})
	r.retryFirst, r.retryMax, r.probeFirst, r.probeMax = 50*time.Millisecond, 160*time.Millisecond, 20*time.Millisecond, 80*time.Millisecond
	s := &said{}
	r.setSay(s.say)
	return r, s
}

// TestRetryThroughOutage: a request made while the API server is down waits for
// it and is made again once it is back; the outage is told once, its end once,
// and the checks back off rather than spin.
func TestRetryThroughOutage(t *testing.T) {
	var down atomic.Bool
	var probes, calls atomic.Int32
	down.Store(true)
	r, s := fastReach(time.Minute, &down, &probes)
	defer r.stop()
	var kicked atomic.Int32
	r.setKick(func() { kicked.Add(1) })
	outage := 600 * time.Millisecond
	time.AfterFunc(outage, func() { down.Store(false) })
	err := r.retry(context.Background(), func(context.Context) error {
		calls.Add(1)
		if down.Load() {
			return &url.Error{Op: "Post", URL: "u", Err: &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if lost, back := s.count("lost the API server at "), s.count("API server back after "); lost != 1 || back != 1 {
		t.Errorf("said %q; want one loss and one return", s.lines)
	}
	if !strings.Contains(s.lines[0], "connection refused") {
		t.Errorf("the loss %q does not say why", s.lines[0])
	}
	// Waiting for the return, the request is not made again and again: after
	// a few tries it waits for the checks, which back off to probeMax.
	if n := calls.Load(); n > 8 {
		t.Errorf("the request was made %d times during a %s outage", n, outage)
	}
	if n := probes.Load(); n > int32(outage/r.probeFirst)+2 {
		t.Errorf("%d checks during a %s outage, every %s at most", n, outage, r.probeFirst)
	}
	if kicked.Load() != 1 {
		t.Errorf("the loop was woken %d times at the return; want once", kicked.Load())
	}
	if o := r.takeOutages(); len(o) != 1 || o[0] < outage/2 {
		t.Errorf("outages %v; want one of about %s", o, outage)
	}
	if _, isDown := r.down(); isDown {
		t.Error("still down after the return")
	}
}

// TestRetryGivesUp: an outage longer than the limit ends the wait with an error
// that says so and what to do.
func TestRetryGivesUp(t *testing.T) {
	var down atomic.Bool
	var probes atomic.Int32
	down.Store(true)
	r, s := fastReach(300*time.Millisecond, &down, &probes)
	defer r.stop()
	start := time.Now()
	err := r.retry(context.Background(), func(context.Context) error {
		return &url.Error{Op: "Post", URL: "u", Err: io.EOF}
	})
	if err == nil || !strings.Contains(err.Error(), "did not answer for") || !strings.Contains(err.Error(), "--run-id") {
		t.Fatalf("retry: %v; want the outage given up on", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("gave up after %s", time.Since(start))
	}
	if r.givenUp() == nil {
		t.Error("givenUp does not say so")
	}
	if n := s.count("lost the API server at "); n != 1 {
		t.Errorf("said %q; want the loss once", s.lines)
	}
}

// TestRetryRefusal: a refusal is returned at once, without checking the API
// server or saying anything.
func TestRetryRefusal(t *testing.T) {
	var down atomic.Bool
	var probes, calls atomic.Int32
	r, s := fastReach(time.Minute, &down, &probes)
	defer r.stop()
	forbidden := apierrors.NewForbidden(jobsGR, "a", errors.New("RBAC"))
	err := r.retry(context.Background(), func(context.Context) error { calls.Add(1); return forbidden })
	if !apierrors.IsForbidden(err) || calls.Load() != 1 || probes.Load() != 0 || len(s.lines) > 0 {
		t.Errorf("error %v after %d calls, %d checks, said %q; want the refusal at once", err, calls.Load(), probes.Load(), s.lines)
	}
}

// TestRetryAnsweringServer: a 500 from an API server that answers its
// readiness check is tried again a few times, then returned; nothing is said.
func TestRetryAnsweringServer(t *testing.T) {
	var down atomic.Bool
	var probes, calls atomic.Int32
	r, s := fastReach(time.Minute, &down, &probes)
	defer r.stop()
	internal := apierrors.NewInternalError(errors.New("failed calling webhook"))
	err := r.retry(context.Background(), func(context.Context) error { calls.Add(1); return internal })
	if !apierrors.IsInternalError(err) || calls.Load() != retryTries {
		t.Errorf("error %v after %d calls; want the 500 after %d", err, calls.Load(), retryTries)
	}
	if len(s.lines) > 0 {
		t.Errorf("said %q for an API server that answers", s.lines)
	}
}

// TestRetryCanceled: a run interrupted while it waits for the API server stops
// waiting.
func TestRetryCanceled(t *testing.T) {
	var down atomic.Bool
	var probes atomic.Int32
	down.Store(true)
	r, _ := fastReach(time.Minute, &down, &probes)
	defer r.stop()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	err := r.retry(ctx, func(context.Context) error { return &url.Error{Op: "Post", URL: "u", Err: io.EOF} })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("retry: %v; want canceled", err)
	}
}

// TestReadyzProbe: the readiness check counts an answer as the API server's
// return, but not a 5xx or a refused connection.
func TestReadyzProbe(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusInternalServerError)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(status.Load()))
		fmt.Fprintln(w, "[-]etcd failed")
	}))
	probe, err := readyz(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := probe(ctx); err == nil {
		t.Error("a 500 from /readyz counts as ready")
	}
	for _, code := range []int{http.StatusOK, http.StatusForbidden} {
		status.Store(int32(code))
		if err := probe(ctx); err != nil {
			t.Errorf("/readyz answering %d: %v; want ready", code, err)
		}
	}
	srv.Close()
	if err := probe(ctx); err == nil {
		t.Error("a closed server counts as ready")
	}
}
