package tracing_test

import (
	"testing"

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
