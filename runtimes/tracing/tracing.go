// Package tracing sends a trace of each run to an OpenTelemetry collector: one
// trace per run, a span per step, per foreach item and per attempt. It is off
// unless the standard OpenTelemetry environment asks for it, and then exports
// with OTLP over HTTP (protobuf):
//
//	OTEL_EXPORTER_OTLP_ENDPOINT          http://collector:4318 (the traces go to /v1/traces)
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT   the full URL of the traces, instead
//	OTEL_EXPORTER_OTLP_HEADERS           key=value,... sent with each export
//	OTEL_TRACES_EXPORTER                 otlp (on, to localhost:4318 by default) or none (off)
//	OTEL_SERVICE_NAME                    the service the spans belong to; manifold by default
//	OTEL_RESOURCE_ATTRIBUTES             key=value,... added to every span's resource
//	OTEL_SDK_DISABLED                    true turns tracing off
//
// and the other OTEL_EXPORTER_OTLP_* settings of the OTLP/HTTP exporter
// (timeout, compression, certificates). An export is not sent on to another
// origin (scheme, host and port) than the endpoint's when the collector
// redirects it, so that its headers stay with the collector.
//
// The spans of a run (Run) are:
//
//	run FLOW                 the whole run; a child of TRACEPARENT when the runner has one
//	  step NAME              a step; for a foreach step, the parent of its items
//	    item NAME[i]         one foreach item
//	      attempt N          one attempt of the step or item
//
// What a trace says passes through credential.Redact, as every output does: a
// foreach item or an error that looks like a credential is withheld.
//
// A span's attributes say which step, item and attempt it is, how it ended
// (manifold.result, manifold.exit_code, manifold.exit_reason), the node it ran
// on, how long it waited for a queue's admission (manifold.queue_seconds) and
// from its creation until it ran (manifold.pending_seconds). A span that failed
// has an error status with the step's error.
//
// A step's process or pod gets the trace context to continue as TRACEPARENT
// (plan.EnvTraceParent): on this machine, its attempt's span; on a cluster, the
// span of its step or item, since the attempts of a Job are pods of one
// template.
package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// Attribute keys of the spans.
const (
	AttrFlow     = "manifold.flow"
	AttrRunID    = "manifold.run_id"
	AttrRuntime  = "manifold.runtime"
	AttrStep     = "manifold.step"
	AttrIndex    = "manifold.item.index"
	AttrItem     = "manifold.item"
	AttrItems    = "manifold.items"
	AttrAttempt  = "manifold.attempt"
	AttrAttempts = "manifold.attempts"
	AttrResult   = "manifold.result"
	AttrExitCode = "manifold.exit_code"
	AttrReason   = "manifold.exit_reason"
	AttrNode     = "manifold.node"
	AttrQueue    = "manifold.queue_seconds"
	AttrPending  = "manifold.pending_seconds"
)

// DefaultServiceName is the service of the spans when OTEL_SERVICE_NAME does not
// name one.
const DefaultServiceName = "manifold"

// Tracer makes the traces of runs and exports them. A nil *Tracer traces
// nothing and costs nothing.
type Tracer struct {
	tp   *sdktrace.TracerProvider
	t    trace.Tracer
	errs *firstError
}

// FromEnv returns the Tracer the OpenTelemetry environment configures (see the
// package doc), or nil when it asks for no tracing. The error says which
// variable holds what Manifold cannot honour. A Tracer sets OpenTelemetry's
// error handler (otel.SetErrorHandler), whose errors Shutdown returns.
func FromEnv(ctx context.Context) (*Tracer, error) {
	if v, _ := strconv.ParseBool(os.Getenv("OTEL_SDK_DISABLED")); v {
		return nil, nil
	}
	switch ex := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); ex {
	case "none":
		return nil, nil
	case "otlp":
	case "":
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil
		}
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: runs are traced with otlp only; set it to otlp, or none to turn tracing off", ex)
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(name); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%s: runs export their traces with OTLP over HTTP; set it to http/protobuf, or unset it", name, p)
			}
			break
		}
	}
	hc, err := exportClient()
	if err != nil {
		return nil, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithHTTPClient(hc))
	if err != nil {
		return nil, fmt.Errorf("tracing (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES still leaves what could be read.
		if res == nil {
			return nil, fmt.Errorf("tracing (OTEL_RESOURCE_ATTRIBUTES): %w", err)
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	// An export that fails while the run goes on is kept for Shutdown to
	// return, not written over the run's output.
	keep := &firstError{}
	otel.SetErrorHandler(keep)
	return &Tracer{tp: tp, t: tp.Tracer("github.com/manifoldflow/manifold/runtimes/tracing"), errs: keep}, nil
}

// exportClient is the HTTP client of the exports: the OTLP/HTTP exporter's
// own, as the environment configures it (OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT,
// _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY; a proxy from
// HTTPS_PROXY), but following no redirect to another origin
// (credential.CheckRedirect): the exporter's own client would send the
// export's headers (OTEL_EXPORTER_OTLP_HEADERS, a collector's API key) there.
// The exporter takes a client whole or not at all, so these settings are read
// here, as it reads them.
func exportClient() (*http.Client, error) {
	timeout := 10 * time.Second
	if name, v := otlpEnv("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return nil, fmt.Errorf("%s=%s: give the export's timeout in milliseconds", name, v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if name, file := otlpEnv("CERTIFICATE"); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s=%s holds no PEM certificate: give the collector's CA certificate", name, file)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	certName, certFile := otlpEnv("CLIENT_CERTIFICATE")
	keyName, keyFile := otlpEnv("CLIENT_KEY")
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s and %s: %w", certName, keyName, err)
		}
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{}
		}
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: credential.CheckRedirect}, nil
}

// otlpEnv returns the variable of an OTLP setting that is set, the traces'
// own (OTEL_EXPORTER_OTLP_TRACES_KEY) before every signal's
// (OTEL_EXPORTER_OTLP_KEY), and its value.
func otlpEnv(key string) (name, value string) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + key, "OTEL_EXPORTER_OTLP_" + key} {
		if v := strings.TrimSpace(os.Getenv(name)); v != "" {
			return name, v
		}
	}
	return "OTEL_EXPORTER_OTLP_" + key, ""
}

// Shutdown ends the Tracer, sending what it has not sent yet; ctx bounds how
// long that may take. The error is the first export that failed, if any did.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return err
	}
	return t.errs.get()
}

// firstError is an OpenTelemetry error handler that keeps the first error.
type firstError struct {
	mu    sync.Mutex
	first error
}

// Handle keeps err if it is the first.
func (f *firstError) Handle(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.first == nil {
		f.first = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.first
}

// Run is the trace of one run. A runtime does not use it directly: the
// scheduling core (package dag) tells it each unit's state changes. Its methods
// do nothing on a nil *Run.
type Run struct {
	t trace.Tracer

	mu    sync.Mutex
	ctx   context.Context
	span  trace.Span
	steps map[string]*span
	units map[unitKey]*unit
}

type unitKey struct {
	step  string
	index int
}

// span is an open span and the context it makes.
type span struct {
	ctx  context.Context
	span trace.Span
	// failed is, for a foreach step, why its first item that failed did.
	failed string
}

// unit is what the trace keeps of a step or foreach item.
type unit struct {
	span
	// attempt is the attempt running (nil between attempts), n its number.
	attempt *span
	n       int
	started time.Time // when the attempt started
	running bool      // the attempt's pending time is known
	// queuedSince is when it began to wait for admission; queued sums the waits.
	queuedSince time.Time
	queued      time.Duration
	ended       bool
}

// Begin starts the trace of run id of flow f on runtime ("local", "kube"); id
// may be "" for a run that is not yet named (see Identify). The
// run's span is a child of the trace context in this process's TRACEPARENT,
// when it has one, so a run started by a traced job continues its trace.
func (t *Tracer) Begin(f *plan.Flow, id, runtime string) *Run {
	if t == nil {
		return nil
	}
	ctx := context.Background()
	if tp := os.Getenv(plan.EnvTraceParent); tp != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": tp})
	}
	attrs := []attribute.KeyValue{attribute.String(AttrFlow, f.Name), attribute.String(AttrRuntime, runtime)}
	if id != "" {
		attrs = append(attrs, attribute.String(AttrRunID, id))
	}
	ctx, s := t.t.Start(ctx, "run "+f.Name, trace.WithAttributes(attrs...))
	return &Run{t: t.t, ctx: ctx, span: s, steps: map[string]*span{}, units: map[unitKey]*unit{}}
}

// Identify gives the run's span the run's ID (AttrRunID), for a trace begun
// before the runtime named the run: an Argo Workflow is named when it is
// created, with its steps' trace context already in it. Nothing when r is nil.
func (r *Run) Identify(id string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.span.SetAttributes(attribute.String(AttrRunID, id))
}

// TraceParent returns the W3C traceparent of the run's span, "" when r is nil.
func (r *Run) TraceParent() string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return traceParent(r.ctx)
}

// unit returns the spans of step s's item index (-1 for the whole step),
// starting them at now when they are not yet.
func (r *Run) unit(s *plan.Step, index int, label string, now time.Time) *unit {
	k := unitKey{s.Name, index}
	if u := r.units[k]; u != nil {
		return u
	}
	parent := r.ctx
	if index >= 0 {
		st := r.steps[s.Name]
		if st == nil {
			ctx, sp := r.t.Start(r.ctx, "step "+s.Name, trace.WithTimestamp(now), trace.WithAttributes(
				attribute.String(AttrStep, s.Name), attribute.Int(AttrItems, len(s.Foreach))))
			st = &span{ctx: ctx, span: sp}
			r.steps[s.Name] = st
		}
		parent = st.ctx
	}
	attrs := []attribute.KeyValue{attribute.String(AttrStep, s.Name)}
	name := "step " + s.Name
	if index >= 0 {
		name = "item " + label
		attrs = append(attrs, attribute.Int(AttrIndex, index))
		if index < len(s.Foreach) {
			attrs = append(attrs, attribute.String(AttrItem, clip(credential.Redact("", s.Foreach[index]), 256)))
		}
	}
	ctx, sp := r.t.Start(parent, name, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	u := &unit{span: span{ctx: ctx, span: sp}}
	r.units[k] = u
	return u
}

// Changed tells the trace that the record of step s's item index (-1 for the
// whole step), named label, changed from before to after; step is the state of
// the whole step now (dag.Summary). A new attempt starts a span, which ends
// when the attempt does (it fails, waits to retry, or the unit ends); a unit's
// span ends with the unit, a foreach step's once step is final.
func (r *Run) Changed(s *plan.Step, index int, label string, before, after record.Task, step record.State) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.unit(s, index, label, now)
	if u.ended {
		return
	}
	for n := before.Attempts + 1; n <= after.Attempts; n++ {
		if u.attempt != nil {
			// The runtime saw a new attempt start: the one before failed.
			r.endAttempt(u, record.Failed, after, now)
		}
		ctx, sp := r.t.Start(u.ctx, "attempt "+strconv.Itoa(n), trace.WithTimestamp(now), trace.WithAttributes(
			attribute.String(AttrStep, s.Name), attribute.Int(AttrAttempt, n)))
		if index >= 0 {
			sp.SetAttributes(attribute.Int(AttrIndex, index))
		}
		u.attempt, u.n, u.started, u.running = &span{ctx: ctx, span: sp}, n, now, false
		u.queuedSince, u.queued = time.Time{}, 0
	}
	switch {
	case after.State == record.Queued && before.State != record.Queued:
		u.queuedSince = now
		if u.attempt != nil {
			u.attempt.span.AddEvent("queued", trace.WithTimestamp(now))
		}
	case before.State == record.Queued && after.State != record.Queued && !u.queuedSince.IsZero():
		u.queued += now.Sub(u.queuedSince)
		u.queuedSince = time.Time{}
		if u.attempt != nil {
			u.attempt.span.AddEvent("admitted", trace.WithTimestamp(now))
		}
	}
	switch {
	case after.State == record.Retrying && before.State != record.Retrying:
		r.endAttempt(u, record.Failed, after, now)
	case after.State.Final():
		r.endAttempt(u, after.State, after, now)
		u.ended = true
		attrs := []attribute.KeyValue{attribute.String(AttrResult, string(after.State)), attribute.Int(AttrAttempts, after.Attempts)}
		attrs = append(attrs, ending(after)...)
		u.span.span.SetAttributes(attrs...)
		status(u.span.span, after.State, after.Error)
		u.span.span.End(trace.WithTimestamp(now))
		st := r.steps[s.Name]
		if st == nil {
			break
		}
		if after.State == record.Failed && st.failed == "" {
			st.failed = label + " failed: " + after.Error
		}
		if step.Final() {
			st.span.SetAttributes(attribute.String(AttrResult, string(step)))
			status(st.span, step, st.failed)
			st.span.End(trace.WithTimestamp(now))
			delete(r.steps, s.Name)
		}
	}
}

// endAttempt ends u's attempt, if one runs, as state with what rec says of it.
func (r *Run) endAttempt(u *unit, state record.State, rec record.Task, now time.Time) {
	a := u.attempt
	if a == nil {
		return
	}
	u.attempt = nil
	if !u.queuedSince.IsZero() {
		u.queued += now.Sub(u.queuedSince)
		u.queuedSince = time.Time{}
	}
	attrs := append([]attribute.KeyValue{attribute.String(AttrResult, string(state))}, ending(rec)...)
	if u.queued > 0 {
		attrs = append(attrs, attribute.Float64(AttrQueue, u.queued.Seconds()))
	}
	a.span.SetAttributes(attrs...)
	msg := rec.Error
	if state == record.Failed && msg == "" {
		msg = "attempt " + strconv.Itoa(u.n) + " failed"
	}
	status(a.span, state, msg)
	a.span.End(trace.WithTimestamp(now))
}

// ending is what a record says of how an attempt ended: exit code, reason and
// node.
func ending(t record.Task) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if t.ExitCode != nil {
		attrs = append(attrs, attribute.Int(AttrExitCode, *t.ExitCode))
	}
	if reason := exitReason(t); reason != "" {
		attrs = append(attrs, attribute.String(AttrReason, credential.Redact("", reason)))
	}
	if t.Node != "" {
		attrs = append(attrs, attribute.String(AttrNode, t.Node))
	}
	return attrs
}

// exitReason is the record's Reason, or for a failure without one, Error (a
// nonzero exit, the kubelet's word) or Signal (a process a signal ended).
func exitReason(t record.Task) string {
	switch {
	case t.Reason != "" || t.State == record.Succeeded:
		return t.Reason
	case t.ExitCode != nil && *t.ExitCode > 0:
		return "Error"
	case t.ExitCode != nil && *t.ExitCode < 0:
		return "Signal"
	}
	return ""
}

// status sets the status of a span that ended as state.
func status(s trace.Span, state record.State, msg string) {
	switch state {
	case record.Succeeded:
		s.SetStatus(codes.Ok, "")
	case record.Failed, record.Interrupted:
		if msg == "" {
			msg = string(state)
		}
		s.SetStatus(codes.Error, clip(credential.Redact("", msg), 1024))
	}
}

// Running tells the trace that the running attempt of step s's item index
// started running at: its pending time is from when the attempt started until
// then. Only the first call of an attempt counts.
func (r *Run) Running(s *plan.Step, index int, at time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.units[unitKey{s.Name, index}]
	if u == nil || u.attempt == nil || u.running {
		return
	}
	u.running = true
	u.attempt.span.SetAttributes(attribute.Float64(AttrPending, max(0, at.Sub(u.started).Seconds())))
	u.attempt.span.AddEvent("running", trace.WithTimestamp(at))
}

// AttemptParent returns the W3C traceparent of the attempt of step s's item
// index (-1 for the whole step) that runs now, or of the step or item when no
// attempt runs; "" when r is nil or the unit has not started.
func (r *Run) AttemptParent(s *plan.Step, index int) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.units[unitKey{s.Name, index}]
	switch {
	case u == nil:
		return ""
	case u.attempt != nil:
		return traceParent(u.attempt.ctx)
	}
	return traceParent(u.ctx)
}

// UnitParent returns the W3C traceparent of the span of step s's item index
// (-1 for the whole step), "" when r is nil or the unit has not started.
func (r *Run) UnitParent(s *plan.Step, index int) string {
	if r == nil {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if u := r.units[unitKey{s.Name, index}]; u != nil {
		return traceParent(u.ctx)
	}
	return ""
}

// End ends the run's span, and any span still open, as state; err says why the
// run did not succeed.
func (r *Run) End(state record.State, err error) {
	if r == nil {
		return
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.units {
		if u.ended {
			continue
		}
		// A unit still going when the run ends was stopped with it.
		rec := record.Task{State: record.Interrupted, Error: "the run ended before it did"}
		r.endAttempt(u, record.Interrupted, rec, now)
		u.ended = true
		u.span.span.SetAttributes(attribute.String(AttrResult, string(record.Interrupted)))
		status(u.span.span, record.Interrupted, rec.Error)
		u.span.span.End(trace.WithTimestamp(now))
	}
	for name, st := range r.steps {
		st.span.End(trace.WithTimestamp(now))
		delete(r.steps, name)
	}
	r.span.SetAttributes(attribute.String(AttrResult, string(state)))
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	status(r.span, state, msg)
	r.span.End(trace.WithTimestamp(now))
}

// traceParent is the traceparent header of the span in ctx, "" without one.
func traceParent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
