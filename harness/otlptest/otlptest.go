// Package otlptest is an OpenTelemetry collector for tests: an HTTP server on
// loopback that accepts OTLP/HTTP protobuf exports of traces (POST /v1/traces)
// and keeps the spans, and a rendering of their tree to compare with what a
// test expects.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a span received, with what tests look at.
type Span struct {
	Name                    string
	TraceID, SpanID, Parent string // hex; Parent is "" for a root span
	Start, End              time.Time
	Attrs                   map[string]string
	Status                  string // Unset, Ok or Error
	Message                 string // the status's description
	Events                  []string
	Resource                map[string]string
}

// Receiver is an OTLP/HTTP trace receiver on loopback.
type Receiver struct {
	// URL is the receiver's base URL: what OTEL_EXPORTER_OTLP_ENDPOINT names.
	URL string

	mu    sync.Mutex
	spans []Span
	// errs are the requests it refused, which fail the test.
	errs []string
}

// New starts a receiver that stops when t ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		srv.Close()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.errs {
			t.Errorf("OTLP receiver: %s", e)
		}
	})
	r.URL = srv.URL
	return r
}

// Env points the OpenTelemetry environment of the test at the receiver, and
// clears the other variables that would change where traces go.
func (r *Receiver) Env(t testing.TB) {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS", "TRACEPARENT"} {
		t.Setenv(name, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	fail := func(code int, format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		r.mu.Lock()
		r.errs = append(r.errs, msg)
		r.mu.Unlock()
		http.Error(w, msg, code)
	}
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		fail(http.StatusNotFound, "%s %s: want POST /v1/traces", req.Method, req.URL.Path)
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		fail(http.StatusUnsupportedMediaType, "Content-Type %q: want application/x-protobuf", ct)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			fail(http.StatusBadRequest, "gzip: %v", err)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		fail(http.StatusBadRequest, "reading the export: %v", err)
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		fail(http.StatusBadRequest, "decoding the export: %v", err)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := Span{
					Name:     s.GetName(),
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					Parent:   hex.EncodeToString(s.GetParentSpanId()),
					Start:    time.Unix(0, int64(s.GetStartTimeUnixNano())),
					End:      time.Unix(0, int64(s.GetEndTimeUnixNano())),
					Attrs:    attrs(s.GetAttributes()),
					Status:   statusName(s.GetStatus().GetCode()),
					Message:  s.GetStatus().GetMessage(),
					Resource: res,
				}
				for _, e := range s.GetEvents() {
					sp.Events = append(sp.Events, e.GetName())
				}
				got = append(got, sp)
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

func statusName(c tracepb.Status_StatusCode) string {
	switch c {
	case tracepb.Status_STATUS_CODE_OK:
		return "Ok"
	case tracepb.Status_STATUS_CODE_ERROR:
		return "Error"
	}
	return "Unset"
}

// attrs renders attribute values as strings.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		var s string
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			s = x.StringValue
		case *commonpb.AnyValue_IntValue:
			s = strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_DoubleValue:
			s = strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
		case *commonpb.AnyValue_BoolValue:
			s = strconv.FormatBool(x.BoolValue)
		default:
			s = fmt.Sprint(v)
		}
		m[kv.GetKey()] = s
	}
	return m
}

// Spans returns the spans received so far, in the order they came.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Tree renders spans as a tree, a line per span indented under its parent:
// its name, those of the attributes keys that it has (key=value, in the order
// of keys) and its status, with the first line of the status's message when
// messages is set. Siblings are in the order of their names, then of their
// start. A span whose parent is not among spans is a root.
func Tree(spans []Span, keys []string, messages bool) string {
	children := map[string][]Span{}
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	var roots []Span
	for _, s := range spans {
		if s.Parent == "" || !ids[s.Parent] {
			roots = append(roots, s)
			continue
		}
		children[s.Parent] = append(children[s.Parent], s)
	}
	order := func(ss []Span) {
		sort.SliceStable(ss, func(i, j int) bool {
			if ss[i].Name != ss[j].Name {
				return ss[i].Name < ss[j].Name
			}
			return ss[i].Start.Before(ss[j].Start)
		})
	}
	var b strings.Builder
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		b.WriteString(s.Name)
		for _, k := range keys {
			if v, ok := s.Attrs[k]; ok {
				fmt.Fprintf(&b, " %s=%s", k, v)
			}
		}
		fmt.Fprintf(&b, " [%s", s.Status)
		if messages && s.Message != "" {
			msg, _, _ := strings.Cut(s.Message, "\n")
			fmt.Fprintf(&b, ": %s", msg)
		}
		b.WriteString("]\n")
		kids := children[s.SpanID]
		order(kids)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	order(roots)
	for _, s := range roots {
		walk(s, 0)
	}
	return b.String()
}
