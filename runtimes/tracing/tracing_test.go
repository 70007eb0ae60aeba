package tracing_test

import (
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/otlptest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// TestTracingOff checks that tracing is off unless the environment asks for it,
// and that what it cannot honour is refused with a clear error.
func TestTracingOff(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
		{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"},
	} {
		for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED"} {
			t.Setenv(name, env[name])
		}
		if tr, err := tracing.FromEnv(t.Context()); tr != nil || err != nil {
			t.Errorf("%v: tracing.FromEnv = %v, %v; want no tracer", env, tr, err)
		}
	}
	for env, want := range map[[2]string]string{
		{"OTEL_TRACES_EXPORTER", "zipkin"}:      "OTEL_TRACES_EXPORTER=zipkin: runs are traced with otlp only; set it to otlp, or none to turn tracing off",
		{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}: "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: runs export their traces with OTLP over HTTP; set it to http/protobuf, or unset it",
	} {
		t.Setenv("OTEL_TRACES_EXPORTER", "")
		t.Setenv("OTEL_SDK_DISABLED", "")
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		t.Setenv(env[0], env[1])
		if tr, err := tracing.FromEnv(t.Context()); tr != nil || err == nil || err.Error() != want {
			t.Errorf("%s=%s: tracing.FromEnv = %v, %v; want the error %q", env[0], env[1], tr, err, want)
		}
		t.Setenv(env[0], "")
	}
}

// TestShutdownSaysWhyNothingWasSent checks that a collector that cannot be
// reached is told by Shutdown, within the time it is given.
func TestShutdownSaysWhyNothingWasSent(t *testing.T) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "TRACEPARENT"} {
		t.Setenv(name, "")
	}
	// Nothing listens on port 1 of loopback.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tr, err := tracing.FromEnv(t.Context())
	if err != nil || tr == nil {
		t.Fatalf("tracing.FromEnv = %v, %v", tr, err)
	}
	run := tr.Begin(&plan.Flow{Name: "lost"}, "r1", "local")
	run.End(record.Succeeded, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	err = tr.Shutdown(ctx)
	if err == nil {
		t.Fatal("Shutdown sent the trace to a port nothing listens on")
	}
	t.Logf("Shutdown: %v", err)
}

// TestQueueAndPending drives a run's trace as run --kube does for a step that
// waits for Kueue: created, queued, admitted, running, succeeded.
func TestQueueAndPending(t *testing.T) {
	rcv := otlptest.New(t)
	rcv.Env(t)
	tr, err := tracing.FromEnv(t.Context())
	if err != nil || tr == nil {
		t.Fatalf("tracing.FromEnv = %v, %v", tr, err)
	}
	step := &plan.Step{Name: "train"}
	run := tr.Begin(&plan.Flow{Name: "queued", Steps: []plan.Step{*step}}, "r1", "kube")
	rec := record.Task{Step: "train", State: record.Pending}
	change := func(f func(*record.Task)) {
		before := rec
		f(&rec)
		run.Changed(step, -1, "train", before, rec, rec.State)
	}
	change(func(t *record.Task) { t.Attempts, t.State = 1, record.Running })
	created := time.Now()
	change(func(t *record.Task) { t.State, t.Reason = record.Queued, "Queued" })
	time.Sleep(20 * time.Millisecond)
	change(func(t *record.Task) { t.State, t.Reason = record.Running, "" })
	run.Running(step, -1, created.Add(time.Second))
	change(func(t *record.Task) { t.State, t.ExitCode, t.Node = record.Succeeded, new(0), "trn1-32xlarge-0" })
	run.End(record.Succeeded, nil)
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var attempt *otlptest.Span
	for _, s := range rcv.Spans() {
		if s.Name == "attempt 1" {
			attempt = &s
		}
	}
	if attempt == nil {
		t.Fatalf("no attempt span in %v", rcv.Spans())
	}
	q, err := strconv.ParseFloat(attempt.Attrs[tracing.AttrQueue], 64)
	if err != nil || q < 0.02 || q > 30 {
		t.Errorf("%s = %q; want the 20ms or more it waited", tracing.AttrQueue, attempt.Attrs[tracing.AttrQueue])
	}
	p, err := strconv.ParseFloat(attempt.Attrs[tracing.AttrPending], 64)
	if err != nil || p < 0.9 || p > 1.1 {
		t.Errorf("%s = %q; want about 1 (it ran a second after it was created)", tracing.AttrPending, attempt.Attrs[tracing.AttrPending])
	}
	if attempt.Attrs[tracing.AttrNode] != "trn1-32xlarge-0" || attempt.Attrs[tracing.AttrResult] != "succeeded" || attempt.Status != "Ok" {
		t.Errorf("attempt: %v, status %s; want node trn1-32xlarge-0, succeeded, Ok", attempt.Attrs, attempt.Status)
	}
	if want := []string{"queued", "admitted", "running"}; !slices.Equal(attempt.Events, want) {
		t.Errorf("events %v; want %v", attempt.Events, want)
	}
}

// TestNoCredentialInTrace: a foreach item, an error and a reason that look
// like credentials are withheld from the spans, as from every output.
func TestNoCredentialInTrace(t *testing.T) {
	rcv := otlptest.New(t)
	rcv.Env(t)
	tr, err := tracing.FromEnv(t.Context())
	if err != nil || tr == nil {
		t.Fatalf("tracing.FromEnv = %v, %v", tr, err)
	}
	const token = "ghp_" + "R4nd0mT0k3nV4lu3Th4tIsThirtySixCh4r5"
	step := &plan.Step{Name: "fetch", Foreach: []string{"https://reader:itempass-42@data.example.com/a", token}}
	run := tr.Begin(&plan.Flow{Name: "secretive", Steps: []plan.Step{*step}}, "r1", "kube")
	for i := range step.Foreach {
		before := record.Task{Step: "fetch", Index: new(i), State: record.Pending}
		after := before
		after.Attempts, after.State = 1, record.Running
		run.Changed(step, i, "fetch["+strconv.Itoa(i)+"]", before, after, record.Running)
		before, after.State = after, record.Failed
		after.Error, after.Reason = "GET https://reader:errpass-42@data.example.com/a: 403", "token "+token
		run.Changed(step, i, "fetch["+strconv.Itoa(i)+"]", before, after, record.Running)
	}
	run.End(record.Failed, errors.New("fetch failed: Authorization: Bearer runtoken-42"))
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	if len(spans) < 5 {
		t.Fatalf("%d spans: %v", len(spans), spans)
	}
	for _, s := range spans {
		text := fmt.Sprint(s.Attrs, s.Message, s.Events)
		for _, secret := range []string{"itempass-42", "errpass-42", token, "runtoken-42"} {
			if strings.Contains(text, secret) {
				t.Errorf("span %s holds %q: %s", s.Name, secret, text)
			}
		}
	}
}

// TestNoHeadersToAnotherOrigin: a collector that redirects the export to
// another origin (another port of loopback) does not get the export's headers
// (OTEL_EXPORTER_OTLP_HEADERS, which carry collectors' API keys) sent there;
// Shutdown says why nothing was sent.
func TestNoHeadersToAnotherOrigin(t *testing.T) {
	var mu sync.Mutex
	var got []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization")+" "+r.Header.Get("X-Api-Key"))
		mu.Unlock()
	}))
	defer other.Close()
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, code)
		}))
		for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "TRACEPARENT"} {
			t.Setenv(name, "")
		}
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", redirector.URL)
		t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer otlp-token-42,x-api-key=otlp-key-42")
		tr, err := tracing.FromEnv(t.Context())
		if err != nil || tr == nil {
			t.Fatalf("tracing.FromEnv = %v, %v", tr, err)
		}
		run := tr.Begin(&plan.Flow{Name: "redirected"}, "r1", "local")
		run.End(record.Succeeded, nil)
		err = tr.Shutdown(t.Context())
		if err == nil || !strings.Contains(err.Error(), other.URL) {
			t.Errorf("%d to %s: Shutdown = %v; want the redirect refused, naming where", code, other.URL, err)
		}
		redirector.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) > 0 {
		t.Errorf("the other origin got the export's headers: %q", got)
	}
}

// TestExportSettings: the exporter's settings of the environment still hold:
// a collector's CA certificate (OTEL_EXPORTER_OTLP_CERTIFICATE) and the
// timeout, whose malformed value is refused naming the variable.
func TestExportSettings(t *testing.T) {
	var exports sync.WaitGroup
	exports.Add(1)
	var once sync.Once
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/traces" {
			once.Do(exports.Done)
		}
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_PROTOCOL", "TRACEPARENT", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"} {
		t.Setenv(name, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5000")
	tr, err := tracing.FromEnv(t.Context())
	if err != nil || tr == nil {
		t.Fatalf("tracing.FromEnv = %v, %v", tr, err)
	}
	tr.Begin(&plan.Flow{Name: "tls"}, "r1", "local").End(record.Succeeded, nil)
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Errorf("an export to a collector whose CA is OTEL_EXPORTER_OTLP_CERTIFICATE: %v", err)
	}
	exports.Wait()

	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s")
	if tr, err := tracing.FromEnv(t.Context()); tr != nil || err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=10s") {
		t.Errorf("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=10s: %v, %v; want it refused", tr, err)
	}
}
