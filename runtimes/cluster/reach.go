package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/runtimes/display"
)

// How a request that got no answer is tried again: after retryFirst, doubling up
// to retryMax; at most retryTries times while the API server answers its
// readiness check (a transient error of its own), for as long as the outage
// limit allows while it does not.
const (
	retryFirst = 500 * time.Millisecond
	retryMax   = 5 * time.Second
	retryTries = 6
)

// How the API server is checked once a request got no answer: its readiness,
// each check bounded by probeTimeout, every probeFirst at first, backing off to
// probeMax; a check that succeeded is not made again before probeFirst.
const (
	probeTimeout = 5 * time.Second
	probeFirst   = time.Second
	probeMax     = 5 * time.Second
)

// transient reports whether err says the API server did not answer, or could not
// answer now, so that the request may succeed if made again: the connection
// refused, reset or cut (a restart), a timeout, or a 429, 500, 503 or 504
// answer (too many requests, or its storage unreachable). A refusal (4xx) is the
// API server's answer and is not transient, nor is a request its caller
// canceled.
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		switch st.Status().Code {
		case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
			http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
		return false
	}
	var op *net.OpError
	var ue *url.Error
	switch {
	case errors.As(err, &op): // dial refused, connection reset, broken pipe
		return true
	case errors.As(err, &ue) && ue.Timeout(), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err)
}

// unanswered reports whether err is transient and no answer of the API server's:
// the connection was refused, reset or cut, or timed out.
func unanswered(err error) bool {
	var st apierrors.APIStatus
	return transient(err) && !errors.As(err, &st)
}

// reach follows whether the cluster's API server answers. Every request the run
// makes goes through it (its transport, and its informers' watch error
// handler): a request that gets no answer makes it check the API server's
// readiness, and when that fails too the API server is lost. It says so once on
// the display, keeps checking (backing off, never busily) and says once when
// the API server is back, waking the run, which then lists its objects anew. An
// outage longer than its limit is given up on: the run fails.
type reach struct {
	host  string
	limit time.Duration
	// probe checks the API server's readiness: nil when it answers.
	probe func(context.Context) error
	// kick wakes the run's loop.
	kick func()
	// The delays of retry and check (retryFirst, retryMax, probeFirst,
	// probeMax).
	retryFirst, retryMax, probeFirst, probeMax time.Duration

	mu      sync.Mutex
	say     func(format string, args ...any) // nil until the display exists
	unsaid  []string                         // what was to be said before it did
	probing bool
	checked time.Time // when a check last found the API server answering
	lostAt  time.Time // zero while it answers
	// back is closed when the API server answers again after being lost, or the
	// outage is given up on; a new one is made at each loss.
	back    chan struct{}
	gaveUp  bool
	outages []time.Duration // outages ended since the loop last took them
	done    chan struct{}
	closed  bool
}

// Follow makes the clients anew so that every request of the run goes past a
// reach, which follows whether the API server answers, with the outage limit
// limit: requests that get no answer are made again (Retry), and the run hears
// of the API server's loss and return (OnBack, SayTo, Down, GivenUp,
// TakeOutages) until StopFollowing.
func (c *Conn) Follow(limit time.Duration) error {
	probe, err := readyz(c.Config)
	if err != nil {
		return err
	}
	r := newReach(c.Host, limit, probe)
	rc := rest.CopyConfig(c.Config)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &transport{r: r, next: rt} })
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := kubeclient.NewDynamic(rc)
	if err != nil {
		return err
	}
	c.Config, c.Client, c.Dynamic, c.reach = rc, client, dyn, r
	return nil
}

// Retry makes the request f, again while the API server does not answer (as
// reach.retry does), or once if the run does not follow it.
func (c *Conn) Retry(ctx context.Context, f func(context.Context) error) error {
	if c.reach == nil {
		return f(ctx)
	}
	return c.reach.retry(ctx, f)
}

// Saw reports whether err, which a request of the run got, is the API server's
// not answering while the run follows it (Follow); when it is, the API server
// is checked, as for the run's own requests.
func (c *Conn) Saw(err error) bool {
	if c.reach == nil || !transient(err) {
		return false
	}
	c.reach.saw(err)
	return true
}

// OnBack has kick called when the API server is back after being lost, or the
// outage is given up on. The run must follow the API server (Follow).
func (c *Conn) OnBack(kick func()) { c.reach.setKick(kick) }

// SayTo has what the followed API server's loss and return say go to say (a
// display's Note), with what there was to say before.
func (c *Conn) SayTo(say func(format string, args ...any)) { c.reach.setSay(say) }

// Down reports whether the followed API server is lost, and since when.
func (c *Conn) Down() (time.Time, bool) { return c.reach.down() }

// GivenUp returns the error that says the run gave up on an outage longer
// than its limit, or nil.
func (c *Conn) GivenUp() error { return c.reach.givenUp() }

// TakeOutages returns how long each outage of the followed API server that
// ended since the last call lasted.
func (c *Conn) TakeOutages() []time.Duration { return c.reach.takeOutages() }

// StopFollowing ends the checks of the API server that Follow started.
func (c *Conn) StopFollowing() { c.reach.stop() }

func newReach(host string, limit time.Duration, probe func(context.Context) error) *reach {
	return &reach{
		host: host, limit: limit, probe: probe, kick: func() {}, back: make(chan struct{}), done: make(chan struct{}),
		retryFirst: retryFirst, retryMax: retryMax, probeFirst: probeFirst, probeMax: probeMax,
	}
}

// readyz returns a check of the readiness of the API server c reaches, through a
// client of its own: the check's own failures must not count as the run's. Any
// answer but a 5xx means the API server answers (a cluster may forbid /readyz).
func readyz(config *rest.Config) (func(context.Context) error, error) {
	pc := rest.CopyConfig(config)
	pc.Timeout = probeTimeout
	pc.WrapTransport = nil
	cs, err := kubeclient.NewForConfig(pc)
	if err != nil {
		return nil, err
	}
	rc := cs.RESTClient()
	return func(ctx context.Context) error {
		err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
		if err == nil || !transient(err) {
			return nil
		}
		return err
	}, nil
}

// setKick has kick wake the run's loop when the API server is back, or the
// outage given up on.
func (r *reach) setKick(kick func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kick = kick
}

// setSay has what reach says go to say (the display's Note), with what it had
// to say before.
func (r *reach) setSay(say func(format string, args ...any)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.say = say
	for _, s := range r.unsaid {
		say("%s", s)
	}
	r.unsaid = nil
}

// tell says msg on the display, or keeps it until there is one. r.mu is held.
func (r *reach) tell(format string, args ...any) {
	if r.say == nil {
		r.unsaid = append(r.unsaid, fmt.Sprintf(format, args...))
		return
	}
	r.say(format, args...)
}

// saw records that a request got err instead of an answer: unless the API server
// is being checked already, or was found answering a moment ago, a check starts.
func (r *reach) saw(err error) {
	if !transient(err) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.probing || r.closed || r.gaveUp || r.lostAt.IsZero() && time.Since(r.checked) < r.probeFirst {
		return
	}
	r.probing = true
	go r.check(time.Now(), err)
}

// check checks the API server until it answers, or the outage is given up on.
func (r *reach) check(since time.Time, cause error) {
	delay := r.probeFirst
	for {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		err := r.probe(ctx)
		cancel()
		now := time.Now()
		r.mu.Lock()
		if err == nil {
			r.probing, r.checked = false, now
			lost := !r.lostAt.IsZero()
			back := r.back
			if lost {
				d := now.Sub(r.lostAt)
				r.lostAt = time.Time{}
				r.outages = append(r.outages, d)
				r.tell("API server back after %s", display.Human(d.Round(100*time.Millisecond)))
			}
			kick := r.kick
			r.mu.Unlock()
			if lost {
				// The return is told, and the loop woken, before the
				// requests that wait for it are let go.
				kick()
				close(back)
			}
			return
		}
		if r.lostAt.IsZero() {
			r.lostAt, r.back = since, make(chan struct{})
			r.tell("lost the API server at %s (%s), waiting for it", since.Format("15:04:05"), oneLine(cause.Error()))
		}
		if now.Sub(r.lostAt) >= r.limit {
			r.gaveUp, r.probing = true, false
			back, kick := r.back, r.kick
			r.mu.Unlock()
			kick()
			close(back)
			return
		}
		r.mu.Unlock()
		select {
		case <-time.After(delay):
		case <-r.done:
			r.mu.Lock()
			r.probing = false
			r.mu.Unlock()
			return
		}
		delay = min(2*delay, r.probeMax)
	}
}

// down reports whether the API server is lost, and since when.
func (r *reach) down() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lostAt, !r.lostAt.IsZero()
}

// givenUp reports whether the run gave up on an outage longer than its limit,
// and returns the error that says so.
func (r *reach) givenUp() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.gaveUp {
		return nil
	}
	return fmt.Errorf("lost the API server at %s (%s) and it did not answer for %s: the run's objects may still be running there; once it is back, resume the run with --run-id",
		r.lostAt.Format("15:04:05"), r.host, display.Human(r.limit))
}

// takeOutages returns how long each outage that ended since the last call
// lasted.
func (r *reach) takeOutages() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.outages
	r.outages = nil
	return o
}

// stop ends the checks.
func (r *reach) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.closed {
		r.closed = true
		close(r.done)
	}
}

// retry makes the request f until it gets an answer: a request that got none
// (transient) is made again with backoff, at most retryTries times while the API
// server answers, and while it is lost, once it is back, until the outage is
// given up on. It returns f's last error, the outage's, or ctx's.
func (r *reach) retry(ctx context.Context, f func(context.Context) error) error {
	delay := r.retryFirst
	for tries := 1; ; tries++ {
		err := f(ctx)
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		r.saw(err)
		if gu := r.givenUp(); gu != nil {
			return gu
		}
		r.mu.Lock()
		lost, back := !r.lostAt.IsZero(), r.back
		r.mu.Unlock()
		if !lost && tries >= retryTries {
			return err
		}
		// While the API server is lost, wait until it is back (the checks back
		// off); otherwise the delay.
		var wait <-chan time.Time
		if !lost {
			back, wait = nil, time.After(delay)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wait:
		case <-back:
		}
		delay = min(2*delay, r.retryMax)
	}
}

// transport has every response of the run's requests go past r: one that got
// no answer, or a 5xx, makes it check the API server.
type transport struct {
	r    *reach
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	switch {
	case req.Context().Err() != nil: // canceled by the run: not the API server's doing
	case err != nil:
		t.r.saw(err)
	case resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented:
		t.r.saw(apierrors.NewGenericServerResponse(resp.StatusCode, req.Method, schema.GroupResource{}, "", "", 0, false))
	}
	return resp, err
}

// WrappedRoundTripper returns the transport t wraps.
func (t *transport) WrappedRoundTripper() http.RoundTripper { return t.next }
