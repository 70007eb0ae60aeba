package image_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

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
// cachedBuild builds the package in dir onto scratch, with the cache in cache
// ("" for none), and returns the result.
func cachedBuild(t *testing.T, dir, cache string) *image.Result {
	t.Helper()
	b := &image.Builder{
		Compiler:   &image.GoBuild{Package: dir, CacheDir: cache},
		Base:       image.ScratchBase{},
		Entrypoint: "/app/standalone",
		Platforms:  []v1.Platform{amd64},
		CacheDir:   cache,
	}
	res, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBuildCache: a build into the cache makes the image a build without one
// makes; a second build of the same source finds its layer there, and a build
// of changed source makes the image a build from scratch makes of it.
func TestBuildCache(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("the test's go build cross-compiles from Linux or macOS")
	}
	tmp := t.TempDir()
	src := standalone(t, filepath.Join(tmp, "src"), "one")
	fresh := cachedBuild(t, src, "")
	cache := filepath.Join(tmp, "cache")
	first := cachedBuild(t, src, cache)
	if first.Digest != fresh.Digest {
		t.Errorf("a build into the cache gave digest %s, one without %s", first.Digest, fresh.Digest)
	}
	if first.Platforms[0].LayerCached {
		t.Error("the first build in an empty cache says its layer was cached")
	}
	again := cachedBuild(t, src, cache)
	if again.Digest != fresh.Digest || !again.Platforms[0].LayerCached {
		t.Errorf("second build: digest %s, layer cached %v; want %s, cached", again.Digest, again.Platforms[0].LayerCached, fresh.Digest)
	}

	standalone(t, src, "two")
	changed := cachedBuild(t, src, cache)
	changedFresh := cachedBuild(t, src, "")
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
