package compile_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/sdk"
)

const builtRef = "registry.example.com/ml/built@sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef"

// builtFlow has Run steps with no image, the flow's image and their own, and a
// Command step with its own image.
func builtFlow() *sdk.Flow {
	noop := func(*sdk.Context) error { return nil }
	return sdk.NewFlow("built", sdk.Image("registry.example.com/ml/flow:v1")).
		Step("a", sdk.Run(noop)).
		Step("b", sdk.Run(noop), sdk.Image("public.ecr.aws/neuron/dlc:1")).
		Step("c", sdk.Command("sh", "-c", "true"), sdk.Image("busybox:1.37"))
}

func images(t *testing.T, f *sdk.Flow, o compile.Options) map[string]string {
	t.Helper()
	p, errs := compile.Compile(f, o)
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs)
	}
	out := map[string]string{}
	for _, s := range p.Steps {
		out[s.Name] = s.Image
	}
	return out
}

// TestBuiltImage: the built image replaces every Run step's image, whatever
// layer gave it, and no Command step's.
func TestBuiltImage(t *testing.T) {
	want := map[string]string{"a": builtRef, "b": builtRef, "c": "busybox:1.37"}
	got := images(t, builtFlow(), compile.Options{BuiltImage: &built.Record{Flow: "built", Reference: builtRef}})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	// Without it, each step keeps its own.
	want = map[string]string{"a": "registry.example.com/ml/flow:v1", "b": "public.ecr.aws/neuron/dlc:1", "c": "busybox:1.37"}
	if diff := cmp.Diff(want, images(t, builtFlow(), compile.Options{})); diff != "" {
		t.Errorf("images without a build (-want +got):\n%s", diff)
	}
}

// TestBuiltImageFromConfig: image_from_build reads the record through
// Options.ReadBuiltImage (here, the record in the working directory), and only
// when it asks.
func TestBuiltImageFromConfig(t *testing.T) {
	t.Chdir(t.TempDir())
	reads := 0
	read := func() (built.Record, error) {
		reads++
		return built.Read(built.File)
	}
	if _, errs := compile.Compile(builtFlow(), compile.Options{ReadBuiltImage: read}); len(errs) > 0 || reads != 0 {
		t.Errorf("without image_from_build: %v, %d reads of the record", errs, reads)
	}
	cfg := compile.Config{ImageFromBuild: true}
	_, errs := compile.Compile(builtFlow(), compile.Options{Config: cfg, ReadBuiltImage: read})
	want := field.ErrorList{field.Required(field.NewPath("config", "image_from_build"), "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("no record (-want +got):\n%s", diff)
	}

	rec := built.Record{Flow: "built", Reference: builtRef, Digest: "sha256:5f70", Platforms: []string{"linux/amd64"}, Built: time.Unix(1e9, 0).UTC()}
	if err := built.Write(built.File, rec); err != nil {
		t.Fatal(err)
	}
	back, err := built.Read(built.File)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec, back); diff != "" {
		t.Errorf("record read back (-want +got):\n%s", diff)
	}
	got := images(t, builtFlow(), compile.Options{Config: cfg, ReadBuiltImage: read})
	if got["a"] != builtRef || got["c"] != "busybox:1.37" {
		t.Errorf("images %v: want a=%s and c=busybox:1.37", got, builtRef)
	}

	// A record of another flow's image is an error, by flag or by config.
	_, errs = compile.Compile(sdk.NewFlow("other", sdk.Image("x:1")).Step("a", sdk.Run(func(*sdk.Context) error { return nil })), compile.Options{Config: cfg, ReadBuiltImage: read})
	want = field.ErrorList{field.Invalid(field.NewPath("config", "image_from_build"), nil, "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("another flow's record (-want +got):\n%s", diff)
	}
	_, errs = compile.Compile(builtFlow(), compile.Options{BuiltImage: &built.Record{Flow: "other", Reference: builtRef}})
	want = field.ErrorList{field.Invalid(field.NewPath("imageFromBuild"), nil, "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("another flow's image (-want +got):\n%s", diff)
	}

	// A record that is not JSON says so.
	if err := os.WriteFile(built.File, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs = compile.Compile(builtFlow(), compile.Options{Config: cfg, ReadBuiltImage: read})
	want = field.ErrorList{field.Invalid(field.NewPath("config", "image_from_build"), nil, "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("a broken record (-want +got):\n%s", diff)
	}
	// Compile itself reads no file: without a reader there is no record.
	_, errs = compile.Compile(builtFlow(), compile.Options{Config: cfg})
	want = field.ErrorList{field.Required(field.NewPath("config", "image_from_build"), "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("no reader (-want +got):\n%s", diff)
	}
}

// TestRunStepNeedsImage: a Run step with no image and no build is an error at
// its image.
func TestRunStepNeedsImage(t *testing.T) {
	f := sdk.NewFlow("f").Step("a", sdk.Run(func(*sdk.Context) error { return nil }))
	_, errs := compile.Compile(f, compile.Options{})
	want := field.ErrorList{field.Required(stepAt("a").Child("image"), "")}
	if diff := cmp.Diff(want, errs, ignoreDetail); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// A build gives it one.
	if _, errs := compile.Compile(f, compile.Options{BuiltImage: &built.Record{Flow: "f", Reference: builtRef}}); len(errs) > 0 {
		t.Errorf("with a build: %v", errs)
	}
}

func TestLoadConfigImageKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "manifold.toml")
	if err := os.WriteFile(path, []byte("base_image = \"scratch\"\nimage_from_build = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := compile.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(compile.Config{BaseImage: "scratch", ImageFromBuild: true}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
