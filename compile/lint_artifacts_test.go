package compile_test

import (
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

// TestLintNoArtifactStore: a flow that keeps or reads artifacts and has no
// store gets one warning, at artifacts, naming every such step by its path
// and the settings that give it a store; with a store, or with nothing that
// keeps artifacts, there is none.
func TestLintNoArtifactStore(t *testing.T) {
	run := func(*sdk.Context) error { return nil }
	hello := func(opts ...sdk.FlowOption) *sdk.Flow {
		return sdk.NewFlow("hello", append([]sdk.FlowOption{sdk.Image(img)}, opts...)...).
			Step("greet", sdk.Run(run)).
			Step("shout", sdk.Run(run), sdk.After("greet")).
			Step("echo", sdk.After("shout"), sdk.Command("sh", "-c", `echo "$MANIFOLD_PARAM_NAME"`))
	}
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		o    compile.Options
		// want holds the phrases the warning must hold; nil for no warning.
		want []string
		// not holds what it must not name.
		not []string
	}{{
		name: "Run steps",
		flow: hello(),
		want: []string{"steps[greet]", "steps[shout]", "ctx.Put", "--artifacts s3://bucket/prefix", "pvc://CLAIM", "ReadWriteMany", "manifold.toml", "artifacts = ", "sdk.ArtifactVolume", "sdk.NoArtifacts()"},
		not:  []string{"steps[echo]"},
	}, {
		name: "a Command step's $(MANIFOLD_ARTIFACTS)",
		flow: sdk.NewFlow("f", sdk.Image(img)).Step("save", sdk.Command("cp", "model.pt", "$(MANIFOLD_ARTIFACTS)/model.pt")),
		want: []string{"but steps[save].command[2] (MANIFOLD_ARTIFACTS) keeps or reads artifacts", "$(MANIFOLD_ARTIFACTS)", "literal"},
	}, {
		name: "a shell's $MANIFOLD_RUN_DIR and a variable made of MANIFOLD_ARTIFACTS",
		flow: sdk.NewFlow("f", sdk.Image(img)).
			Step("load", sdk.Command("sh", "-c", `cat "$MANIFOLD_RUN_DIR/prep/out.json"`)).
			Step("save", sdk.Env("OUT", "$(MANIFOLD_ARTIFACTS)/out"), sdk.Command("train")),
		want: []string{"steps[load].command[2]", "steps[save].env[OUT]"},
	}, {
		name: "a Command step that keeps nothing",
		flow: sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("echo", "hello")),
	}, {
		name: "Run steps that say they keep nothing",
		flow: hello(sdk.NoArtifacts()),
	}, {
		name: "one of two Run steps says it keeps nothing",
		flow: sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Run(run), sdk.NoArtifacts()).Step("b", sdk.Run(run)),
		want: []string{"but its Run step steps[b] keeps or reads artifacts"},
		not:  []string{"steps[a]"},
	}, {
		name: "an S3 store",
		flow: hello(),
		o:    compile.Options{Artifacts: "s3://ml-artifacts/flows"},
	}, {
		name: "a volume in the flow's code",
		flow: hello(sdk.ArtifactVolume("artifacts")),
	}, {
		name: "manifold.toml's store",
		flow: hello(),
		o:    compile.Options{Config: compile.Config{Artifacts: "pvc://artifacts"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustCompile(t, tc.flow, tc.o)
			var got []compile.Warning
			for _, w := range compile.Lint(p) {
				if w.Field == "artifacts" {
					got = append(got, w)
				}
			}
			if tc.want == nil {
				if len(got) > 0 {
					t.Fatalf("warnings %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d warnings at artifacts (%q), want one", len(got), got)
			}
			for _, phrase := range tc.want {
				if !strings.Contains(got[0].Detail, phrase) {
					t.Errorf("%q does not say %q", got[0].Detail, phrase)
				}
			}
			for _, phrase := range tc.not {
				if strings.Contains(got[0].Detail, phrase) {
					t.Errorf("%q names %q", got[0].Detail, phrase)
				}
			}
		})
	}
}

// TestLintNoArtifactStoreBounded: a flow of many Run steps names a few and
// counts the rest, so that the warning stays one line a reader can take in.
func TestLintNoArtifactStoreBounded(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img))
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		f = f.Step(name, sdk.Run(func(*sdk.Context) error { return nil }))
	}
	p := mustCompile(t, f, compile.Options{})
	for _, w := range compile.Lint(p) {
		if w.Field != "artifacts" {
			continue
		}
		if !strings.Contains(w.Detail, "steps[a]") || strings.Contains(w.Detail, "steps[h]") || !strings.Contains(w.Detail, "3 more") {
			t.Errorf("%q: want the first steps named and 3 more counted", w.Detail)
		}
		return
	}
	t.Fatal("no warning at artifacts")
}
