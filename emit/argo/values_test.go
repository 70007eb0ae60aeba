package argo_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// oddRunes are characters that compile takes in any value: C0 controls
// (ESC, BEL, VT, NUL, US), DEL, C1 controls (NEL among them), and runes that
// are not printable, in the Basic Multilingual Plane and past it.
var oddRunes = []rune{0x1b, 0x07, 0x0b, 0x00, 0x1f, 0x7f, 0x80, 0x85, 0x9f, 0x200b, 0xfeff, 0xe0001, 0xf0000}

// valueFlows are flows holding v in every value a user gives: a param's
// default, a foreach item, a command's argument and a variable, of a
// container step and of a multi-node one.
func valueFlows(v string) map[string]*sdk.Flow {
	return map[string]*sdk.Flow{
		"param": sdk.NewFlow("param", sdk.Image("busybox"), sdk.Param("p", "a"+v+"b")).
			Step("s", sdk.Command("true")),
		"item": sdk.NewFlow("item", sdk.Image("busybox")).
			Step("s", sdk.Command("true"), sdk.Foreach("x", "a"+v+"b")),
		"container": sdk.NewFlow("container", sdk.Image("busybox")).
			Step("s", sdk.Command("echo", "a"+v+"b"), sdk.Env("V", "a"+v+"b")),
		"nodes": sdk.NewFlow("nodes", sdk.Image("busybox"), sdk.Param("p", "x")).
			Step("s", sdk.Command("echo", "a"+v+"b"), sdk.Env("V", "a"+v+"b"), sdk.Nodes(2)),
	}
}

// TestArgoEmitsWhatArgoTakes: whatever character a value holds, the argo
// target either writes a WorkflowTemplate that Argo's own validator (and its
// substitution of every resource template's manifest) takes, or refuses the
// value at its path, naming the character: never a file that the engine
// refuses. A param's default and a foreach item, which Argo substitutes into
// its templates, writing each character as Go quotes it (\x1b, \a, \U000e0001:
// not JSON), are refused with such a character; a command or variable,
// which Argo does not substitute, is carried as written, in a multi-node
// step's manifest too, in both argo_multi_node modes.
func TestArgoEmitsWhatArgoTakes(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	refused := map[string]bool{}
	for _, r := range oddRunes {
		v := string(r)
		for name, f := range valueFlows(v) {
			for _, mode := range []string{plan.ArgoJobSet, plan.ArgoJob} {
				if mode == plan.ArgoJob && name != "nodes" {
					continue
				}
				what := fmt.Sprintf("%U in %s (%s)", r, name, mode)
				p := compileMode(t, f, mode)
				files, errs := emit.Files(argo.Target{}, p)
				if len(errs) > 0 {
					for _, e := range errs {
						if (e.Field != "params[p].default" && e.Field != "steps[s].foreach[1]") || !strings.Contains(e.Detail, fmt.Sprintf("%U", r)) {
							t.Errorf("%s: refused at %s: %s; want a param's default or an item refused, naming the character", what, e.Field, e.Detail)
						}
					}
					refused[what] = true
					continue
				}
				paths = append(paths, writeFile(t, dir, fmt.Sprintf("%x-%s-%s", r, name, mode), files[0].Data))
			}
		}
	}
	if out, ok := argolint.Run(t, paths...); !ok {
		t.Errorf("Argo's validator refuses what the argo target wrote:\n%s", out)
	}
	if out, ok := argolint.Manifests(t, runUID, paths...); !ok {
		t.Errorf("Argo's substitution of the resource templates fails:\n%s", out)
	}
	// What Argo's substitution cannot write, and nothing else, is refused.
	for _, r := range oddRunes {
		q := fmt.Sprintf("%+q", string(r))
		argoCannot := strings.Contains(q, `\x`) || strings.Contains(q, `\a`) || strings.Contains(q, `\v`) || strings.Contains(q, `\U`)
		for _, name := range []string{"param", "item"} {
			what := fmt.Sprintf("%U in %s (%s)", r, name, plan.ArgoJobSet)
			if refused[what] != argoCannot {
				t.Errorf("%s: refused %t; Argo writes it %s", what, refused[what], q)
			}
		}
	}
	if diff := cmp.Diff(map[string]bool{}, without(refused, "param", "item")); diff != "" {
		t.Errorf("values Argo does not substitute refused (-want +got):\n%s", diff)
	}
}

// without returns the entries of m whose key names none of the flows.
func without(m map[string]bool, flows ...string) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		keep := true
		for _, f := range flows {
			if strings.Contains(k, " in "+f+" ") {
				keep = false
			}
		}
		if keep {
			out[k] = v
		}
	}
	return out
}

// FuzzArgoValidates: a value holding anything, as a param's default, a
// foreach item, a command's argument and a variable of a container step and of
// a multi-node step (both argo_multi_node modes), gives either files that
// Argo's own validator takes (tools/argolint: its lint of the
// WorkflowTemplate, and its substitution of every resource template's
// manifest), or a refusal of the param's default or the item, at its path,
// of a value that Argo's substitution cannot write as JSON (argopod.Escape).
func FuzzArgoValidates(f *testing.F) {
	for _, s := range []string{"\x1b", "\x7f", "a\ab", "\v", "\U000e0001", "\u0080", "\u0085", "\x00", "\x1b[31mred\x1b[0m",
		"$(MANIFOLD_BRACES)", "{{workflow.name}}", `{{=sprig.upper("x")}}`, "a\x7f{{x}}$$(MANIFOLD_BRACES)", "ü ✓ \"' \n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dir := t.TempDir()
		var paths []string
		for name, fl := range valueFlows(s) {
			for _, mode := range []string{plan.ArgoJobSet, plan.ArgoJob} {
				if mode == plan.ArgoJob && name != "nodes" {
					continue
				}
				p, errs := compile.Compile(fl, compile.Options{Config: compile.Config{ArgoMultiNode: mode}})
				if len(errs) > 0 {
					return // not UTF-8, say: compile refuses it with a path (FuzzFlowOptions)
				}
				files, errs := emit.Files(argo.Target{}, p)
				if len(errs) > 0 {
					for _, e := range errs {
						if e.Field != "params[p].default" && e.Field != "steps[s].foreach[1]" {
							t.Errorf("%q in %s: refused at %s: %s", s, name, e.Field, e.Detail)
						}
					}
					if json.Valid([]byte(`"` + argopod.Escape("a"+s+"b") + `"`)) {
						t.Errorf("%q in %s: refused, though Argo writes it as JSON: %v", s, name, errs)
					}
					continue
				}
				paths = append(paths, writeFile(t, dir, name+"-"+mode, files[0].Data)) // the WorkflowTemplate's
			}
		}
		if len(paths) == 0 {
			return
		}
		if out, ok := argolint.Run(t, paths...); !ok {
			t.Errorf("%q: Argo's validator refuses what the argo target wrote:\n%s", s, out)
		}
		if out, ok := argolint.Manifests(t, runUID, paths...); !ok {
			t.Errorf("%q: Argo's substitution of the resource templates fails:\n%s", s, out)
		}
	})
}
