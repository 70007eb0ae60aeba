package image_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/manifoldflow/manifold/image"
)

// standalone writes a module of its own holding one main package that prints
// greeting, and returns its directory.
func standalone(t *testing.T, dir, greeting string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module example.com/standalone\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(" + `"` + greeting + `"` + ") }\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goBuild builds the package in dir for linux/amd64 with flags into out, as a
// user would build the flow program, and returns out.
func goBuild(t *testing.T, dir, out string, flags ...string) string {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOAMD64=v1")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", strings.Join(flags, " "), err, output)
	}
	return out
}

// cachedBuild builds the package in dir onto scratch, with the cache in cache
// and reuse as GoBuild.Reuse, and returns the result and the lines GoBuild
// said.
func cachedBuild(t *testing.T, dir, cache, reuse string) (*image.Result, string) {
	t.Helper()
	var said strings.Builder
	b := &image.Builder{
		Compiler: &image.GoBuild{Package: dir, CacheDir: cache, Reuse: reuse, Progress: func(line string) {
			said.WriteString(line + "\n")
		}},
		Base:       image.ScratchBase{},
		Entrypoint: "/app/standalone",
		Platforms:  []v1.Platform{amd64},
		CacheDir:   cache,
	}
	res, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res, said.String()
}

// TestBuildReuse: a program built for the platform with the image's flags from
// the same source is reused, not linked again, and the image is the one a build
// from scratch makes; a program built otherwise, or from older source, is not,
// and the image is the same too. A second build finds the program and its layer
// in the cache.
func TestBuildReuse(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the test's go build cross-compiles from Linux or macOS")
	}
	tmp := t.TempDir()
	src := standalone(t, filepath.Join(tmp, "src"), "one")
	fresh, said := cachedBuild(t, src, "", "")
	if said != "" {
		t.Errorf("a build without a cache said %q", said)
	}

	prebuilt := goBuild(t, src, filepath.Join(tmp, "prebuilt"), image.GoBuildFlags...)
	want, err := os.ReadFile(prebuilt)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(tmp, "cache")
	reused, said := cachedBuild(t, src, cache, prebuilt)
	if !strings.Contains(said, "reused this program") {
		t.Errorf("GoBuild said %q, want that it reused %s", said, prebuilt)
	}
	if reused.Digest != fresh.Digest {
		t.Errorf("reusing the program gave digest %s, building it %s", reused.Digest, fresh.Digest)
	}
	if _, program := topLayer(t, reused.Image, "app/standalone"); !bytes.Equal(program, want) {
		t.Errorf("the image's program (%d bytes) is not the reused one (%d bytes)", len(program), len(want))
	}
	if reused.Platforms[0].LayerCached {
		t.Error("the first build in an empty cache says its layer was cached")
	}

	again, said := cachedBuild(t, src, cache, prebuilt)
	if said != "" {
		t.Errorf("the second build said %q: the cached program is newer than the one to reuse", said)
	}
	if again.Digest != fresh.Digest || !again.Platforms[0].LayerCached {
		t.Errorf("second build: digest %s, layer cached %v; want %s, cached", again.Digest, again.Platforms[0].LayerCached, fresh.Digest)
	}

	// Built without -trimpath: not reused, and says so.
	other := goBuild(t, src, filepath.Join(tmp, "other"), "-buildvcs=false")
	res, said := cachedBuild(t, src, filepath.Join(tmp, "cache2"), other)
	if !strings.Contains(said, "was built without -trimpath") || strings.Contains(said, "reused this program") {
		t.Errorf("GoBuild said %q, want that the program was built without -trimpath", said)
	}
	if res.Digest != fresh.Digest {
		t.Errorf("digest %s, want %s", res.Digest, fresh.Digest)
	}

	// Older than the source: go build links it anew.
	standalone(t, src, "two")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(prebuilt, future, future); err != nil {
		t.Fatal(err)
	}
	changed, said := cachedBuild(t, src, cache, prebuilt)
	if !strings.Contains(said, "is not what go build makes now") {
		t.Errorf("GoBuild said %q, want that the program is not what go build makes now", said)
	}
	changedFresh, _ := cachedBuild(t, src, "", "")
	if changed.Digest != changedFresh.Digest || changed.Digest == fresh.Digest {
		t.Errorf("after a change: digest %s, a build from scratch %s, before the change %s", changed.Digest, changedFresh.Digest, fresh.Digest)
	}
	if changed.Platforms[0].LayerCached {
		t.Error("a changed program's layer came from the cache")
	}
}

// sizedCompiler writes a program of its own content, so that each build has a
// layer of its own.
type sizedCompiler struct{ content string }

func (c sizedCompiler) Compile(_ context.Context, p v1.Platform, dir string) (string, error) {
	path := filepath.Join(dir, "prog-"+p.Architecture)
	return path, os.WriteFile(path, []byte("#!/bin/sh\necho "+c.content+"\n"), 0o755)
}

// TestLayerCache: a cached layer gives the digest of a build without the cache;
// a damaged one is made again; the cache keeps the newest few layers.
func TestLayerCache(t *testing.T) {
	cache := t.TempDir()
	build := func(content, cacheDir string) *image.Platform {
		t.Helper()
		res, err := (&image.Builder{Compiler: sizedCompiler{content}, Base: image.ScratchBase{}, Entrypoint: "/bin/prog", CacheDir: cacheDir}).Build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if d, err := res.Image.Digest(); err != nil || d != res.Digest {
			t.Fatalf("digest %s (%v), result says %s", d, err, res.Digest)
		}
		return &res.Platforms[0]
	}
	digest := func(p *image.Platform) v1.Hash {
		t.Helper()
		d, err := p.Image.Digest()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	plain := digest(build("zero", ""))
	first := build("zero", cache)
	second := build("zero", cache)
	if first.LayerCached || !second.LayerCached {
		t.Errorf("layer cached: first build %v, second %v; want false, true", first.LayerCached, second.LayerCached)
	}
	if digest(first) != plain || digest(second) != plain {
		t.Errorf("digests %s, %s with the cache, %s without", digest(first), digest(second), plain)
	}
	_, program := topLayer(t, second.Image, "bin/prog")
	if string(program) != "#!/bin/sh\necho zero\n" {
		t.Errorf("the cached layer holds %q", program)
	}

	// A damaged layer file is not used.
	layers, err := filepath.Glob(filepath.Join(cache, "layers", "*.tar.gz"))
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers in the cache: %v (%v), want one", layers, err)
	}
	if err := damage(layers[0]); err != nil {
		t.Fatal(err)
	}
	if again := build("zero", cache); again.LayerCached || digest(again) != plain {
		t.Errorf("after damage: cached %v, digest %s; want a new layer, %s", again.LayerCached, digest(again), plain)
	}

	for _, c := range []string{"one", "two", "three", "four", "five"} {
		build(c, cache)
	}
	entries, err := os.ReadDir(filepath.Join(cache, "layers"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 8 {
		t.Errorf("the cache holds %v, want the 4 newest layers and their descriptions", names)
	}
	if !build("five", cache).LayerCached {
		t.Error("the newest layer is not in the cache")
	}
}

// damage flips one byte in the middle of the file at path, keeping its size.
func damage(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	data[len(data)/2] ^= 0xff
	return os.WriteFile(path, data, 0o644)
}

// TestProgram: without the go command, a program built with the image's flags
// makes the image go build would make; one built otherwise, or not a Go
// program, is a clear error.
func TestProgram(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the test's go build cross-compiles from Linux or macOS")
	}
	tmp := t.TempDir()
	src := standalone(t, filepath.Join(tmp, "src"), "one")
	fresh, _ := cachedBuild(t, src, "", "")
	build := func(path string) (*image.Result, error) {
		return (&image.Builder{
			Compiler:   image.Program{Path: path},
			Base:       image.ScratchBase{},
			Entrypoint: "/app/standalone",
		}).Build(context.Background())
	}
	res, err := build(goBuild(t, src, filepath.Join(tmp, "prebuilt"), image.GoBuildFlags...))
	if err != nil {
		t.Fatal(err)
	}
	if res.Digest != fresh.Digest {
		t.Errorf("the program as it is gave digest %s, go build %s", res.Digest, fresh.Digest)
	}

	other := goBuild(t, src, filepath.Join(tmp, "other"), "-buildvcs=false")
	_, err = build(other)
	if !errors.Is(err, image.ErrBuild) || !strings.Contains(err.Error(), "was built without -trimpath") || !strings.Contains(err.Error(), image.GoBuildCommand(amd64)) {
		t.Errorf("a program built without -trimpath: got %v, want ErrBuild saying so and how to build it", err)
	}
	checkOneLine(t, err, "-trimpath")

	script := filepath.Join(tmp, "script")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = build(script)
	if !errors.Is(err, image.ErrBuild) || !strings.Contains(err.Error(), "no Go build information") {
		t.Errorf("a script: got %v, want ErrBuild saying it is not a Go program", err)
	}
}
