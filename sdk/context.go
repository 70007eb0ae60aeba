package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/propagation"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// Context is what a Run body receives: the standard context (cancelled when the step
// must stop), the step's params and foreach item, and its artifacts.
//
// Artifacts are JSON values kept in the run's artifact store: Put(name, v) stores
// <step>[/<index>]/<name>.json and Get reads what an earlier step put. On this
// machine the store is the run directory (MANIFOLD_RUN_DIR, or
// .manifold/runs/default when it is unset); on a cluster it is the flow's S3
// store or shared volume (package artifact). A Command step finds its own
// artifact location in MANIFOLD_ARTIFACTS.
//
// When the run is traced (OTEL_EXPORTER_OTLP_ENDPOINT, see package
// runtimes/tracing), the step gets the trace context it continues in the
// TRACEPARENT variable of its process or pod: TraceParent returns it, and the
// Context carries it as the remote parent span, so a span started from it with
// OpenTelemetry's API is a child of the step's attempt (on a cluster, of the step
// or item):
//
//	ctx, span := otel.Tracer("train").Start(c, "load data")
//	defer span.End()
//
// (The step's program exports its own spans: it sets up an OpenTelemetry
// TracerProvider of its own, reading the same OTEL_* variables.) A Command step
// reads TRACEPARENT itself; OpenTelemetry's SDKs and tools such as
// opentelemetry-instrument and otel-cli do.
type Context struct {
	context.Context
	flow, step  string
	params      map[string]string
	item        string
	itemJSON    []byte
	index       int
	count       int
	spec        *FlowSpec
	store       artifact.Store
	values      string
	traceParent string
}

// ContextConfig describes the step a Context is made for.
type ContextConfig struct {
	Flow, Step string
	// Params maps each flow param's name to its value.
	Params map[string]string
	// Item and Index are the foreach item and its index; Index is -1 for a step
	// without Foreach.
	Item  string
	Index int
	// ItemJSON is the JSON of an item of sdk.ForeachOf (any JSON value); Item
	// is then its text (a string's, or the JSON of any other value). Count is
	// the number of items of the step's foreach.
	ItemJSON []byte
	Count    int
	// Spec is the flow, which GetAll reads to know how many items a foreach
	// step had; nil where the step does not join a foreach.
	Spec *FlowSpec
	// Store keeps the run's artifacts; when nil, they are kept in the directory
	// RunDir (artifact.Dir).
	Store  artifact.Store
	RunDir string
	// TraceParent is the W3C trace context the step continues (the TRACEPARENT
	// its runtime gave it), "" when the run is not traced.
	TraceParent string
	// Values is the directory in which the step publishes its values
	// (MANIFOLD_VALUES): when set, Put also writes each artifact's bytes to
	// <Values>/<name>.json, where the step's engine reads a value that a later
	// step fans out over or branches on. "" writes no such file.
	Values string
}

// NewContext returns the Context a Run body gets. The CLI's step command and the
// runtimes call it; flows do not need to.
func NewContext(ctx context.Context, c ContextConfig) *Context {
	if ctx == nil {
		ctx = context.Background()
	}
	store := c.Store
	if store == nil {
		store = artifact.Dir(c.RunDir)
	}
	if c.TraceParent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": c.TraceParent})
	}
	return &Context{Context: ctx, flow: c.Flow, step: c.Step, params: c.Params,
		item: c.Item, itemJSON: c.ItemJSON, index: c.Index, count: c.Count, spec: c.Spec,
		store: store, values: c.Values, traceParent: c.TraceParent}
}

// Invoke calls the Run body fn of a step with ctx, as the step's container
// does (`<flow> step NAME`) and as package flowtest does in a test's process;
// a panic in fn becomes an error that holds its stack.
func Invoke(fn func(*Context) error, ctx *Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
		}
	}()
	return fn(ctx)
}

// TraceParent returns the W3C trace context (a traceparent header,
// "00-<trace id>-<span id>-<flags>") of the span the step continues, "" when
// the run is not traced. The Context itself carries it as its remote parent
// span (trace.SpanContextFromContext).
func (c *Context) TraceParent() string { return c.traceParent }

// Flow returns the flow's name.
func (c *Context) Flow() string { return c.flow }

// Step returns the step's name.
func (c *Context) Step() string { return c.step }

// Param returns the value of the flow param name, or "" if the flow declares none.
func (c *Context) Param(name string) string { return c.params[name] }

// Item returns the step's foreach item, or "" for a step without Foreach.
func (c *Context) Item() string { return c.item }

// Index returns the zero-based index of the step's foreach item, or -1.
func (c *Context) Index() int { return c.index }

// ArtifactDir returns where this step's artifacts are kept: a directory, or the
// s3:// URL under which its objects are (what a Command step gets as
// MANIFOLD_ARTIFACTS).
func (c *Context) ArtifactDir() string {
	return c.store.Location(artifact.StepKey(c.step, c.index))
}

// Put stores v, encoded as JSON, as this step's artifact name. The write is atomic: a
// reader sees the old artifact or the new one, never part of one, even if the step
// is killed while it writes. Where the step publishes values (ContextConfig.Values,
// MANIFOLD_VALUES), Put also writes the same bytes to <Values>/<name>.json, which
// its engine reads once the step has ended.
func (c *Context) Put(name string, v any) error {
	if err := checkArtifactName(name); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("artifact %q: %w", name, err)
	}
	key := artifact.Key(c.step, c.index, name)
	if err := c.store.Put(c, key, append(data, '\n')); err != nil {
		return fmt.Errorf("putting artifact %q of %s: %w", name, describe(c.step, c.index), err)
	}
	// The local runner points the values at the step's own directory of the
	// store: what was put there is published already.
	if dst := filepath.Join(c.values, name+".json"); c.values != "" && !sameFile(c.store, key, dst) {
		if err := publish(dst, append(data, '\n')); err != nil {
			return fmt.Errorf("publishing artifact %q of %s: %w", name, describe(c.step, c.index), err)
		}
	}
	return nil
}

// sameFile reports whether store keeps key in the file path.
func sameFile(store artifact.Store, key, path string) bool {
	d, ok := store.(artifact.Dir)
	return ok && filepath.Clean(d.Location(key)) == filepath.Clean(path)
}

// publish writes data to the file path through a rename, so that a reader
// (the engine, or a store kept in the same directory) sees all of it or none;
// the file is readable by all, as a sidecar of another user reads it.
func publish(path string, data []byte) error {
	if err := atomicfile.Write(path, data); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}

// Get decodes the artifact name of step into v.
func (c *Context) Get(step, name string, v any) error {
	return c.get(step, -1, name, v)
}

// GetIndex decodes the artifact name that item index of the foreach step wrote.
func (c *Context) GetIndex(step string, index int, name string, v any) error {
	if index < 0 {
		return fmt.Errorf("artifact %q of step %q: index %d is negative", name, step, index)
	}
	return c.get(step, index, name, v)
}

func (c *Context) get(step string, index int, name string, v any) error {
	if err := checkArtifactName(name); err != nil {
		return err
	}
	if err := checkArtifactName(step); err != nil {
		return fmt.Errorf("step %q: %w", step, err)
	}
	key := artifact.Key(step, index, name)
	data, err := c.store.Get(c, key)
	if artifact.IsNotExist(err) {
		return fmt.Errorf("%s has no artifact %q (looked for %s): did it run and Put it?", describe(step, index), name, c.store.Location(key))
	}
	if err != nil {
		return fmt.Errorf("getting artifact %q of %s: %w", name, describe(step, index), err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("artifact %q of %s: %w", name, describe(step, index), err)
	}
	return nil
}

// describe names a step, or an item of a foreach step, in messages.
func describe(step string, index int) string {
	if index < 0 {
		return fmt.Sprintf("step %q", step)
	}
	return fmt.Sprintf("item %d of step %q", index, step)
}

// ArtifactDir returns where a step keeps its artifacts in the run directory runDir:
// <run dir>/<step>, or <run dir>/<step>/<index> for item index of a foreach step
// (index is -1 for a step without Foreach). Runtimes give a Command step this
// directory as MANIFOLD_ARTIFACTS.
func ArtifactDir(runDir, step string, index int) string {
	if index < 0 {
		return filepath.Join(runDir, step)
	}
	return filepath.Join(runDir, step, strconv.Itoa(index))
}

var artifactName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*$`) })

// CheckArtifactName returns why name cannot name an artifact, or nil.
func CheckArtifactName(name string) error { return checkArtifactName(name) }

func checkArtifactName(name string) error {
	if !artifactName().MatchString(name) || len(name) > 200 {
		return fmt.Errorf("artifact name %q must be letters, digits, '_', '.' or '-', not starting with '.' or '-'", name)
	}
	return nil
}
