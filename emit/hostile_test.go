package emit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// hostileValue and hostileArgs hold what YAML, JSON, Python, Argo's and
// Airflow's templating, and the kubelet could each take for something else.
var (
	hostileValue = "\x00\x01\x1b[31m\u2028\ufeff\t\r\n end"
	hostileArgs  = []string{"echo", "\x7f", "{{ x }}", "{% raw %}", "$(A)", "---", "- a", ": b", "#c", "yes", "no", "on", "0755", "1e3", "~", "*x", "&a", "!t", "@", "`", "'", "\"", ""}
)

// hostile is one flow at or past a limit, and what must come of it: errors at
// the paths named (each error with a type and a path), or, with no paths, a
// plan that every target renders to files that parse.
type hostile struct {
	name string
	flow func() *sdk.Flow
	// errAt holds a path every error must be under; empty for a flow that
	// compiles.
	errAt string
	// check, if set, looks further at a plan that compiled.
	check func(t *testing.T, p *plan.Flow, files map[string][]byte)
}

// step is a flow "f" with one Command step "s" and opts.
func step(opts ...sdk.StepOption) func() *sdk.Flow {
	return func() *sdk.Flow {
		return sdk.NewFlow("f", sdk.Image("example.com/flow:v1")).Step("s", append([]sdk.StepOption{sdk.Command("true")}, opts...)...)
	}
}

func hostileFlows() []hostile {
	long := strings.Repeat("a", compile.MaxNameLength)
	out := []hostile{
		{name: "names at the limit", flow: func() *sdk.Flow {
			return sdk.NewFlow(long, sdk.Image("example.com/flow:v1")).Step(long, sdk.Command("true"), sdk.Nodes(2), sdk.Foreach("x"))
		}},
		{name: "flow name past the limit", flow: func() *sdk.Flow {
			return sdk.NewFlow(long+"a", sdk.Image("example.com/flow:v1")).Step("s", sdk.Command("true"))
		}, errAt: "name"},
		{name: "unicode step name", flow: func() *sdk.Flow {
			return sdk.NewFlow("f", sdk.Image("example.com/flow:v1")).Step("träin", sdk.Command("true"))
		}, errAt: "steps[träin].name"},
		{name: "control characters in a step name", flow: func() *sdk.Flow {
			return sdk.NewFlow("f", sdk.Image("example.com/flow:v1")).Step("a\x00b\nc", sdk.Command("true"))
		}, errAt: "steps"},
		{name: "control characters and unicode in values", flow: step(
			sdk.Env("A", hostileValue), sdk.Env("B", "日本語 🚀"), sdk.Command(hostileArgs...)),
			check: func(t *testing.T, p *plan.Flow, files map[string][]byte) {
				// Every string reaches the Job's container as it was given.
				var j batchv1.Job
				doc := bytes.SplitN(files["f.job.yaml"], []byte("\n---\n"), 2)[1]
				if err := yaml.UnmarshalStrict(doc, &j); err != nil {
					t.Fatal(err)
				}
				c := j.Spec.Template.Spec.Containers[0]
				if !slices.Equal(c.Command, hostileArgs) {
					t.Errorf("command %q, want %q", c.Command, hostileArgs)
				}
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				if env["A"] != hostileValue || env["B"] != "日本語 🚀" {
					t.Errorf("env A %q, B %q", env["A"], env["B"])
				}
			}},
		{name: "10,000 env vars", flow: func() *sdk.Flow {
			opts := []sdk.StepOption{}
			for i := range 10000 {
				opts = append(opts, sdk.Env(fmt.Sprintf("V%d", i), strings.Repeat("x", i%50)))
			}
			return step(opts...)()
		}, check: func(t *testing.T, p *plan.Flow, files map[string][]byte) {
			if n := len(p.Steps[0].Env); n != 10000 {
				t.Errorf("plan has %d env vars, want 10000", n)
			}
		}},
		{name: "1 MB command line", flow: step(sdk.Command("sh", "-c", strings.Repeat("echo x; ", 1<<17)))},
		{name: "10,000-step cycle", flow: func() *sdk.Flow {
			f := sdk.NewFlow("f", sdk.Image("example.com/flow:v1"))
			for i := range 10000 {
				f.Step(fmt.Sprintf("s%d", i), sdk.Command("true"), sdk.After(fmt.Sprintf("s%d", (i+1)%10000)))
			}
			return f
		}, errAt: "steps[", check: nil},
		{name: "10,000 foreach items", flow: func() *sdk.Flow {
			items := make([]string, 10000)
			for i := range items {
				items[i] = fmt.Sprintf("shard-%05d", i)
			}
			return step(sdk.Foreach(items...))()
		}, check: func(t *testing.T, p *plan.Flow, files map[string][]byte) {
			if n := bytes.Count(files["f.job.yaml"], []byte("\nkind: Job\n")); n != 10000 {
				t.Errorf("%d Jobs for 10,000 items", n)
			}
		}},
	}
	// Every numeric option at 0, negative and its maximum: errors at the
	// option's path, or a plan every target renders.
	numeric := map[string]func(int64) sdk.StepOption{
		"trainium":     func(n int64) sdk.StepOption { return sdk.Trainium(int(n)) },
		"inferentia":   func(n int64) sdk.StepOption { return sdk.Inferentia(int(n)) },
		"efa":          func(n int64) sdk.StepOption { return sdk.EFA(int(n)) },
		"gpu":          func(n int64) sdk.StepOption { return sdk.GPU(int(n)) },
		"nodes":        func(n int64) sdk.StepOption { return sdk.Nodes(int(n)) },
		"port":         func(n int64) sdk.StepOption { return sdk.Port(int(n)) },
		"retry":        func(n int64) sdk.StepOption { return sdk.Retry(int(n)) },
		"runAsUser":    func(n int64) sdk.StepOption { return sdk.RunAsUser(n) },
		"timeout":      func(n int64) sdk.StepOption { return sdk.Timeout(time.Duration(n)) },
		"retryBackoff": func(n int64) sdk.StepOption { return sdk.RetryBackoff(time.Duration(n)) },
		"resources":    func(n int64) sdk.StepOption { return sdk.Resource("example.com/fpga", n) },
	}
	for name, opt := range numeric {
		for _, n := range []int64{0, -1, math.MaxInt32, math.MaxInt64} {
			out = append(out, hostile{name: fmt.Sprintf("%s %d", name, n), flow: step(opt(n)), errAt: "steps[s]." + name + "?"})
		}
	}
	return out
}

// TestHostileFlows: each flow of hostileFlows gets clear errors at its paths, or
// a plan that every target renders to files that parse — never a panic.
func TestHostileFlows(t *testing.T) {
	all := targets.All()
	for _, h := range hostileFlows() {
		t.Run(h.name, func(t *testing.T) {
			p, errs := compile.Compile(h.flow(), compile.Options{})
			// A path ending in ? may hold errors or compile.
			optional := strings.HasSuffix(h.errAt, "?")
			prefix := strings.TrimSuffix(h.errAt, "?")
			switch {
			case len(errs) > 0 && h.errAt == "":
				t.Fatalf("compile: %v", errs.ToAggregate())
			case len(errs) == 0 && h.errAt != "" && !optional:
				t.Fatalf("compiled; want errors at %s", h.errAt)
			}
			for _, e := range errs {
				if e.Type == "" || !strings.HasPrefix(e.Field, prefix) {
					t.Errorf("error %q: want a type and a path under %s", e.Error(), prefix)
				}
				if len(e.Error()) > 2000 {
					t.Errorf("an error of %d bytes: %.200s…", len(e.Error()), e.Error())
				}
			}
			if p == nil {
				return
			}
			files := map[string][]byte{}
			for _, target := range all {
				out, errs := emit.Files(target, p)
				for _, e := range errs {
					if e.Type == "" || e.Detail == "" {
						t.Errorf("%s: error without a type or detail: %#v", target.Name(), e)
					}
				}
				for _, f := range out {
					files[f.Name] = f.Data
					parses(t, f)
				}
			}
			if h.check != nil {
				h.check(t, p, files)
			}
		})
	}
}

// parses checks that a file reads back as what its name says: YAML documents,
// JSON, or (for the DAG) Python text that is UTF-8 and ends its last line.
func parses(t *testing.T, f emit.File) {
	t.Helper()
	switch {
	case strings.HasSuffix(f.Name, ".yaml"):
		for i, doc := range bytes.Split(f.Data, []byte("\n---\n")) {
			var v any
			if err := yaml.Unmarshal(doc, &v); err != nil {
				t.Errorf("%s: document %d does not parse: %v", f.Name, i, err)
			}
		}
	case strings.HasSuffix(f.Name, ".json"):
		if !json.Valid(f.Data) {
			t.Errorf("%s is not JSON", f.Name)
		}
	case strings.HasSuffix(f.Name, ".py"):
		if !bytes.HasSuffix(f.Data, []byte("\n")) {
			t.Errorf("%s does not end its last line", f.Name)
		}
	default:
		t.Errorf("unexpected file %s", f.Name)
	}
}
