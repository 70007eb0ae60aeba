package local_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/manifoldflow/manifold/harness/otlptest"
	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/tracing"
	"github.com/manifoldflow/manifold/sdk"
)

func init() { programs["traced"] = tracedFlow }

// tracedFlow's Run step keeps what its Context says of the trace it continues.
var tracedFlow = sdk.NewFlow("traced", sdk.Image("registry.example.com/traced:v1")).
	Step("look", sdk.Run(func(ctx *sdk.Context) error {
		sc := trace.SpanContextFromContext(ctx)
		return ctx.Put("trace", map[string]any{
			"traceparent": ctx.TraceParent(), "env": os.Getenv("TRACEPARENT"),
			"trace": sc.TraceID().String(), "span": sc.SpanID().String(), "remote": sc.IsRemote(),
		})
	}))

// traced runs flow traced into a receiver of its own, and returns the run and
// the spans the receiver got once the tracer is shut down.
func traced(t *testing.T, ctx context.Context, flow *sdk.Flow) (run, []otlptest.Span) {
	t.Helper()
	rcv := otlptest.New(t)
	rcv.Env(t)
	tr, err := tracing.FromEnv(t.Context())
	if err != nil || tr == nil {
		t.Fatalf("tracing.FromEnv = %v, %v; want a tracer for OTEL_EXPORTER_OTLP_ENDPOINT", tr, err)
	}
	r := runFlow(t, ctx, flow, local.Options{Tracer: tr})
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Shutdown(sctx); err != nil {
		t.Fatalf("shutting the tracer down: %v", err)
	}
	return r, rcv.Spans()
}

// keys are the attributes the trees below show.
var keys = []string{tracing.AttrIndex, tracing.AttrAttempt, tracing.AttrAttempts, tracing.AttrResult, tracing.AttrExitCode, tracing.AttrReason}

// byName returns the one span named name.
func byName(t *testing.T, spans []otlptest.Span, name string) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, s := range spans {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q; want 1", len(found), name)
	}
	return found[0]
}

// child returns the one span named name whose parent is parent.
func child(t *testing.T, spans []otlptest.Span, parent otlptest.Span, name string) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, s := range spans {
		if s.Name == name && s.Parent == parent.SpanID {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %q under %q; want 1", len(found), name, parent.Name)
	}
	return found[0]
}

// TestTraceDiamond traces a diamond whose b fails once and succeeds on its
// retry, and whose foreach step c has an item that fails, so that d never
// starts.
func TestTraceDiamond(t *testing.T) {
	t.Setenv("OTEL_SERVICE_NAME", "diamond-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "team=ml")
	flow := sdk.NewFlow("diamond", sdk.Image("registry.example.com/diamond:v1")).
		Step("a", sdk.Command("sh", "-c", `echo "$TRACEPARENT" > "$MANIFOLD_ARTIFACTS/tp"`)).
		Step("b", sdk.After("a"), sdk.Retry(1), sdk.Command("sh", "-c",
			`echo "$TRACEPARENT" >> "$MANIFOLD_ARTIFACTS/tp"; [ -e "$MANIFOLD_ARTIFACTS/tried" ] && exit 0; touch "$MANIFOLD_ARTIFACTS/tried"; echo broken >&2; exit 3`)).
		Step("c", sdk.After("a"), sdk.Foreach("x", "y"), sdk.Command("sh", "-c",
			`echo "$TRACEPARENT" > "$MANIFOLD_ARTIFACTS/tp"; [ "$MANIFOLD_ITEM" = x ] || { echo "no $MANIFOLD_ITEM" >&2; exit 2; }`)).
		Step("d", sdk.After("b", "c"), sdk.Command("true"))
	r, spans := traced(t, t.Context(), flow)
	if r.err == nil {
		t.Fatalf("run succeeded; want c[1] to fail it")
	}
	firstLine, _, _ := strings.Cut(r.err.Error(), "\n")
	want := `run diamond manifold.result=failed [Error: ` + firstLine + `]
  step a manifold.attempts=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
    attempt 1 manifold.attempt=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
  step b manifold.attempts=2 manifold.result=succeeded manifold.exit_code=0 [Ok]
    attempt 1 manifold.attempt=1 manifold.result=failed manifold.exit_code=3 manifold.exit_reason=Error [Error: exit status 3: broken]
    attempt 2 manifold.attempt=2 manifold.result=succeeded manifold.exit_code=0 [Ok]
  step c manifold.result=failed [Error: c[1] failed: exit status 2: no y]
    item c[0] manifold.item.index=0 manifold.attempts=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
      attempt 1 manifold.item.index=0 manifold.attempt=1 manifold.result=succeeded manifold.exit_code=0 [Ok]
    item c[1] manifold.item.index=1 manifold.attempts=1 manifold.result=failed manifold.exit_code=2 manifold.exit_reason=Error [Error: exit status 2: no y]
      attempt 1 manifold.item.index=1 manifold.attempt=1 manifold.result=failed manifold.exit_code=2 manifold.exit_reason=Error [Error: exit status 2: no y]
  step d manifold.attempts=0 manifold.result=skipped [Unset]
`
	if got := otlptest.Tree(spans, keys, true); got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}

	root := byName(t, spans, "run diamond")
	if root.Parent != "" {
		t.Errorf("run span has parent %s; want a root", root.Parent)
	}
	if root.Attrs[tracing.AttrRunID] != r.res.ID || root.Attrs[tracing.AttrFlow] != "diamond" || root.Attrs[tracing.AttrRuntime] != "local" {
		t.Errorf("run span attributes %v; want run %s of flow diamond, runtime local", root.Attrs, r.res.ID)
	}
	if root.Resource["service.name"] != "diamond-test" || root.Resource["team"] != "ml" {
		t.Errorf("resource %v; want service.name diamond-test (OTEL_SERVICE_NAME) and team=ml (OTEL_RESOURCE_ATTRIBUTES)", root.Resource)
	}
	for _, s := range spans {
		if s.TraceID != root.TraceID {
			t.Errorf("span %s is in trace %s; want the run's, %s", s.Name, s.TraceID, root.TraceID)
		}
		if s.End.Before(s.Start) || s.End.After(root.End) || s.Start.Before(root.Start) {
			t.Errorf("span %s runs from %s to %s, outside the run's %s to %s", s.Name, s.Start, s.End, root.Start, root.End)
		}
		// Every attempt knows how long its process took to start.
		if s.Name == "attempt 1" || s.Name == "attempt 2" {
			if v, err := strconv.ParseFloat(s.Attrs[tracing.AttrPending], 64); err != nil || v < 0 {
				t.Errorf("%s: %s = %q; want a duration in seconds", s.Name, tracing.AttrPending, s.Attrs[tracing.AttrPending])
			}
		}
	}

	// Each process got its own attempt's span as TRACEPARENT.
	tp := func(s otlptest.Span) string { return fmt.Sprintf("00-%s-%s-01", s.TraceID, s.SpanID) }
	a, b, c0 := byName(t, spans, "step a"), byName(t, spans, "step b"), byName(t, spans, "item c[0]")
	wantTP := map[string]string{
		filepath.Join(r.artifactDir("a", -1), "tp"): tp(child(t, spans, a, "attempt 1")) + "\n",
		filepath.Join(r.artifactDir("b", -1), "tp"): tp(child(t, spans, b, "attempt 1")) + "\n" + tp(child(t, spans, b, "attempt 2")) + "\n",
		filepath.Join(r.artifactDir("c", 0), "tp"):  tp(child(t, spans, c0, "attempt 1")) + "\n",
	}
	for path, want := range wantTP {
		if got := readFile(t, path); got != want {
			t.Errorf("%s: TRACEPARENT %q; want %q", path, got, want)
		}
	}
}

// TestTraceRunStep checks that a Run step's Context continues its attempt's
// span, and that the run continues the trace of the TRACEPARENT its runner
// got.
func TestTraceRunStep(t *testing.T) {
	rcv := otlptest.New(t)
	rcv.Env(t)
	outer := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	t.Setenv("TRACEPARENT", outer)
	tr, err := tracing.FromEnv(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := runFlow(t, t.Context(), tracedFlow, local.Options{Tracer: tr})
	if r.err != nil {
		t.Fatalf("run: %v\n%s", r.err, r.stderr)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rcv.Spans()
	run := byName(t, spans, "run traced")
	if run.TraceID != "0af7651916cd43dd8448eb211c80319c" || run.Parent != "b7ad6b7169203331" {
		t.Errorf("run span in trace %s under %s; want it to continue the runner's TRACEPARENT %s", run.TraceID, run.Parent, outer)
	}
	attempt := child(t, spans, child(t, spans, run, "step look"), "attempt 1")
	tp := fmt.Sprintf("00-%s-%s-01", attempt.TraceID, attempt.SpanID)
	want := map[string]any{"env": tp, "traceparent": tp, "trace": attempt.TraceID, "span": attempt.SpanID, "remote": true}
	var got map[string]any
	if err := json.Unmarshal([]byte(readFile(t, r.artifactDir("look", -1), "trace.json")), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what the step's Context saw (-want +got):\n%s", diff)
	}
}

// TestTraceInterrupt interrupts a traced run: every span still open ends, as
// interrupted, and is sent.
func TestTraceInterrupt(t *testing.T) {
	flow := sdk.NewFlow("stopped", sdk.Image("registry.example.com/stopped:v1")).
		Step("sleep", sdk.Command("sh", "-c", `touch "$MANIFOLD_ARTIFACTS/started"; exec sleep 60`)).
		Step("never", sdk.After("sleep"), sdk.Command("true"))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := t.TempDir()
	go func() {
		for ctx.Err() == nil {
			if m, _ := filepath.Glob(filepath.Join(root, "*", "sleep", "started")); len(m) > 0 {
				cancel()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	rcv := otlptest.New(t)
	rcv.Env(t)
	tr, err := tracing.FromEnv(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	r := runFlow(t, ctx, flow, local.Options{Tracer: tr, Root: root})
	if r.res == nil || r.res.State != "interrupted" {
		t.Fatalf("run ended %v, %v; want interrupted", r.res, r.err)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := `run stopped manifold.result=interrupted [Error: ` + r.err.Error() + `]
  step sleep manifold.attempts=1 manifold.result=interrupted manifold.exit_code=-1 manifold.exit_reason=Signal [Error: interrupted]
    attempt 1 manifold.attempt=1 manifold.result=interrupted manifold.exit_code=-1 manifold.exit_reason=Signal [Error: interrupted]
`
	if got := otlptest.Tree(rcv.Spans(), keys, true); got != want {
		t.Errorf("span tree:\n%s\nwant:\n%s", got, want)
	}
}
