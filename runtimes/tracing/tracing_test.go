package tracing_test

import (
	"context"
	"testing"
	"time"

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
