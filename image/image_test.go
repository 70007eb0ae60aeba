package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/image"
)

var (
	amd64 = v1.Platform{OS: "linux", Architecture: "amd64"}
	arm64 = v1.Platform{OS: "linux", Architecture: "arm64"}
	epoch = time.Unix(0, 0).UTC()
)

// startRegistry serves a real OCI distribution registry (go-containerregistry's)
// on loopback, through wrap when given, and returns its host:port.
func startRegistry(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// baseImage makes a base image for p: two random layers of the given media
// family, an environment, a user and a working directory.
func baseImage(t *testing.T, p v1.Platform, oci bool) v1.Image {
	t.Helper()
	img := empty.Image
	layerType := types.DockerLayer
	if oci {
		img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
		layerType = types.OCILayer
	}
	for range 2 {
		l, err := random.Layer(512, layerType)
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "BASE=yes"}
	cf.Config.User = "65532"
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Cmd = []string{"/bin/base-cmd"}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatalf("pushing base %s: %v", ref, err)
	}
}

// pushIndex pushes an OCI index of the images, each described by its platform.
func pushIndex(t *testing.T, ref string, imgs ...v1.Image) {
	t.Helper()
	idx := v1.ImageIndex(empty.Index)
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cf.Platform()}})
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatalf("pushing base index %s: %v", ref, err)
	}
}

func newBase(t *testing.T, ref string) image.Base {
	t.Helper()
	b, err := image.NewBase(ref)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustTag(t *testing.T, ref string) name.Tag {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	return tag
}

func digests(t *testing.T, layers []v1.Layer) []string {
	t.Helper()
	var out []string
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d.String())
	}
	return out
}

// topLayer reads the image's last layer: its tar headers, and the content of the
// regular file at path.
func topLayer(t *testing.T, img v1.Image, path string) ([]*tar.Header, []byte) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[len(layers)-1].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var hdrs []*tar.Header
	var content []byte
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, hdr)
		if hdr.Name == path {
			if content, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	return hdrs, content
}

// checkLayer checks the headers of the program's layer: the directories above
// the program, then the program, all root's, 0755, at the epoch.
func checkLayer(t *testing.T, hdrs []*tar.Header, program string) {
	t.Helper()
	type entry struct {
		Name     string
		Type     byte
		Mode     int64
		UID, GID int
		ModTime  time.Time
	}
	var got []entry
	for _, h := range hdrs {
		got = append(got, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.UTC()})
	}
	var want []entry
	parts := strings.Split(program, "/")
	for i := 1; i < len(parts); i++ {
		want = append(want, entry{strings.Join(parts[:i], "/") + "/", tar.TypeDir, 0o755, 0, 0, epoch})
	}
	want = append(want, entry{program, tar.TypeReg, 0o755, 0, 0, epoch})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("program layer entries (-want +got):\n%s", diff)
	}
}

// runProgram writes the program to a file and runs it with args and env.
func runProgram(t *testing.T, program []byte, env []string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "program")
	if err := os.WriteFile(path, program, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", path, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// checkImageProgram checks that program was built as the program of an image:
// with the image's build tags, without kind, and answering each workstation
// command with an error that says where it runs.
func checkImageProgram(t *testing.T, program []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "program")
	if err := os.WriteFile(path, program, 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tags string
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			tags = s.Value
		}
	}
	if tags != image.ImageBuildTags {
		t.Errorf("built with -tags %q, want %q", tags, image.ImageBuildTags)
	}
	for _, m := range info.Deps {
		if m.Path == "sigs.k8s.io/kind" || m.Path == "github.com/russross/blackfriday/v2" {
			t.Errorf("the program of an image links %s", m.Path)
		}
	}
	for _, args := range [][]string{{"kind", "up"}, {"image", "build", "--push"}, {"check", "--rbac"}, {"run", "--kube"}} {
		cmd := exec.Command(path, args...)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		want := args[0] + " runs from a workstation"
		if args[0] == "run" {
			want = "run --kube runs from a workstation"
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), want) {
			t.Errorf("%s in the program of an image: %v, %q; want exit status 2 and %q", strings.Join(args, " "), err, out, want)
		}
	}
}

func helloBuild(base image.Base, t time.Time) *image.Builder {
	return &image.Builder{
		Compiler:   &image.GoBuild{Package: filepath.Join(exampletest.Root(), "examples", "hello")},
		Base:       base,
		Entrypoint: "/usr/local/bin/hello",
		Time:       t,
	}
}

// TestBuildHello builds examples/hello onto a base in a real registry, pushes it,
// pulls it back by digest and runs the program from its top layer; then builds it
// again and gets the same digest.
func TestBuildHello(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t, nil)
	base := baseImage(t, amd64, false)
	push(t, host+"/base:v1", base)

	res, err := helloBuild(newBase(t, host+"/base:v1"), time.Time{}).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tag := mustTag(t, host+"/flows/hello:v1")
	pub, err := image.Registry{Tag: tag}.Publish(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	wantRef := host + "/flows/hello@" + res.Digest.String()
	if pub.Reference != wantRef {
		t.Errorf("reference %s, want %s", pub.Reference, wantRef)
	}

	ref, err := name.NewDigest(pub.Reference)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pulling %s: %v", ref, err)
	}
	if d, err := img.Digest(); err != nil || d != res.Digest {
		t.Errorf("pulled digest %v (%v), want %s", d, err, res.Digest)
	}
	if d, err := remote.Head(tag); err != nil || d.Digest != res.Digest {
		t.Errorf("tag %s is %v (%v), want %s", tag, d, err, res.Digest)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.DockerManifestSchema2 {
		t.Errorf("media type %s (%v): want the base's, %s", mt, err, types.DockerManifestSchema2)
	}

	// Layers: the base's, then exactly one more.
	baseLayers, err := base.Layers()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != len(baseLayers)+1 {
		t.Fatalf("%d layers, want the base's %d and one more", len(layers), len(baseLayers))
	}
	if diff := cmp.Diff(digests(t, baseLayers), digests(t, layers[:len(baseLayers)])); diff != "" {
		t.Errorf("base layers (-want +got):\n%s", diff)
	}
	if mt, err := layers[len(layers)-1].MediaType(); err != nil || mt != types.DockerLayer {
		t.Errorf("program layer media type %s (%v), want %s", mt, err, types.DockerLayer)
	}

	// Config: the program as entrypoint, no command, the base's environment,
	// user and working directory, the platform, a fixed time.
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	type config struct {
		OS, Architecture string
		Created          time.Time
		Entrypoint, Cmd  []string
		Env              []string
		User, WorkingDir string
		DiffIDs, History int
	}
	got := config{cf.OS, cf.Architecture, cf.Created.UTC(), cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Env, cf.Config.User, cf.Config.WorkingDir, len(cf.RootFS.DiffIDs), len(cf.History)}
	want := config{"linux", "amd64", epoch, []string{"/usr/local/bin/hello"}, nil, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "BASE=yes"}, "65532", "/home/nonroot", 3, 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}

	// The program in the top layer runs a step of the flow on this machine.
	hdrs, program := topLayer(t, img, "usr/local/bin/hello")
	checkLayer(t, hdrs, "usr/local/bin/hello")
	if len(program) == 0 {
		t.Fatal("no program at usr/local/bin/hello in the top layer")
	}
	runDir := t.TempDir()
	out := runProgram(t, program, []string{"MANIFOLD_RUN_DIR=" + runDir, "MANIFOLD_PARAM_NAME=image"}, "step", "greet")
	if !strings.Contains(out, "hello, image") {
		t.Errorf("step greet printed %q, want hello, image", out)
	}
	if _, err := os.Stat(filepath.Join(runDir, "greet", "greeting.json")); err != nil {
		t.Errorf("step greet left no artifact: %v", err)
	}
	checkImageProgram(t, program)

	// The same source and base give the same digest.
	again, err := helloBuild(newBase(t, host+"/base:v1"), time.Time{}).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Digest != res.Digest {
		t.Errorf("a second build has digest %s, the first %s", again.Digest, res.Digest)
	}
	t.Logf("hello: program %d bytes, layer %d bytes, go build %s", res.Platforms[0].ProgramSize, res.Platforms[0].LayerSize, res.Platforms[0].Compile)
}

func tinyBuild(base image.Base, platforms ...v1.Platform) *image.Builder {
	return &image.Builder{
		Compiler:   &image.GoBuild{Package: filepath.Join(exampletest.Root(), "image", "testdata", "tiny")},
		Base:       base,
		Entrypoint: "/app/tiny",
		Platforms:  platforms,
	}
}

// TestBuildIndex builds two platforms onto an OCI index base: the result is an
// OCI index with an image per platform, each on its own platform's base.
func TestBuildIndex(t *testing.T) {
	ctx := context.Background()
	host := startRegistry(t, nil)
	bases := map[string]v1.Image{
		"linux/amd64":   baseImage(t, amd64, true),
		"linux/arm64":   baseImage(t, v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, true),
		"linux/ppc64le": baseImage(t, v1.Platform{OS: "linux", Architecture: "ppc64le"}, true),
	}
	pushIndex(t, host+"/base:multi", bases["linux/ppc64le"], bases["linux/amd64"], bases["linux/arm64"])

	res, err := tinyBuild(newBase(t, host+"/base:multi"), amd64, arm64).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Image != nil || res.Index == nil {
		t.Fatalf("two platforms made no index: %+v", res)
	}
	pub, err := image.Registry{Tag: mustTag(t, host+"/tiny:v1")}.Publish(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewDigest(pub.Reference)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatalf("pulling index %s: %v", ref, err)
	}
	if mt, err := idx.MediaType(); err != nil || mt != types.OCIImageIndex {
		t.Errorf("index media type %s (%v), want %s", mt, err, types.OCIImageIndex)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, desc := range m.Manifests {
		platforms = append(platforms, desc.Platform.String())
	}
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64/v8"}, platforms); diff != "" {
		t.Errorf("index platforms (-want +got):\n%s", diff)
	}
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		key := desc.Platform.OS + "/" + desc.Platform.Architecture
		baseLayers, err := bases[key].Layers()
		if err != nil {
			t.Fatal(err)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != len(baseLayers)+1 {
			t.Fatalf("%s: %d layers, want the base's %d and one more", key, len(layers), len(baseLayers))
		}
		if diff := cmp.Diff(digests(t, baseLayers), digests(t, layers[:len(baseLayers)])); diff != "" {
			t.Errorf("%s: base layers are not the %s base's (-want +got):\n%s", key, key, diff)
		}
		if mt, err := layers[len(layers)-1].MediaType(); err != nil || mt != types.OCILayer {
			t.Errorf("%s: program layer media type %s (%v), want %s", key, mt, err, types.OCILayer)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS+"/"+cf.Architecture != key || len(cf.Config.Entrypoint) != 1 || cf.Config.Entrypoint[0] != "/app/tiny" {
			t.Errorf("%s: config says %s/%s, entrypoint %q", key, cf.OS, cf.Architecture, cf.Config.Entrypoint)
		}
		hdrs, program := topLayer(t, img, "app/tiny")
		checkLayer(t, hdrs, "app/tiny")
		f, err := elf.NewFile(bytes.NewReader(program))
		if err != nil {
			t.Fatalf("%s: the program is not an ELF file: %v", key, err)
		}
		wantMachine := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}[key]
		if f.Machine != wantMachine {
			t.Errorf("%s: program for %s, want %s", key, f.Machine, wantMachine)
		}
		if key == "linux/amd64" {
			if out := runProgram(t, program, nil, "step", "x"); out != "tiny linux/amd64 step x\n" {
				t.Errorf("the amd64 program printed %q", out)
			}
		}
	}

	// A tarball holds one platform.
	_, err = image.Tarball{Path: filepath.Join(t.TempDir(), "x.tar"), Repository: mustTag(t, host+"/tiny").Context()}.Publish(ctx, res)
	if !errors.Is(err, image.ErrPlatform) {
		t.Errorf("a tarball of an index: got %v, want ErrPlatform", err)
	}
}

// TestTarball writes a one-platform image on scratch to a docker save tarball,
// tagged by digest and by the tag given, and reads it back.
func TestTarball(t *testing.T) {
	ctx := context.Background()
	res, err := tinyBuild(newBase(t, image.Scratch)).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "out", "tiny.tar")
	tag := mustTag(t, "registry.example.com/ml/tiny:v1")
	pub, err := image.Tarball{Path: path, Repository: tag.Context(), Tag: &tag}.Publish(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	wantRef := "registry.example.com/ml/tiny:sha256-" + res.Digest.Hex
	if pub.Reference != wantRef {
		t.Errorf("reference %s, want %s", pub.Reference, wantRef)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(path) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 {
		t.Fatalf("%d images in the tarball, want 1", len(m))
	}
	// go-containerregistry writes the tags of one image in map order.
	if diff := cmp.Diff([]string{wantRef, "registry.example.com/ml/tiny:v1"}, m[0].RepoTags, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	loadTag := mustTag(t, wantRef)
	img, err := tarball.ImageFromPath(path, &loadTag)
	if err != nil {
		t.Fatal(err)
	}
	gotConfig, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	wantConfig, err := res.Image.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if gotConfig != wantConfig {
		t.Errorf("config %s in the tarball, want %s", gotConfig, wantConfig)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v): on scratch, want only the program's", len(layers), err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || cf.Config.User != "" {
		t.Errorf("scratch config: %s/%s user %q", cf.OS, cf.Architecture, cf.Config.User)
	}
	hdrs, program := topLayer(t, img, "app/tiny")
	checkLayer(t, hdrs, "app/tiny")
	if out := runProgram(t, program, nil); out != "tiny linux/amd64 \n" {
		t.Errorf("the program printed %q", out)
	}

	// The digest depends on the image's time: a fixed one makes it reproducible.
	b := tinyBuild(newBase(t, image.Scratch))
	b.Time = epoch.Add(time.Hour)
	later, err := b.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if later.Digest == res.Digest {
		t.Errorf("a build at another time has the same digest %s", res.Digest)
	}
}

// TestKind: --kind writes the tarball and hands it to the loader; pods name the
// image by its digest tag.
func TestKind(t *testing.T) {
	ctx := context.Background()
	res, err := (&image.Builder{Compiler: fakeCompiler{}, Base: newBase(t, image.Scratch), Entrypoint: "/app/x"}).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	repo := mustTag(t, "manifold.local/x").Context()
	var loaded []string
	k := image.Kind{Cluster: "manifold", Repository: repo, Load: func(_ context.Context, archive string) error {
		m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(archive) })
		if err != nil {
			return err
		}
		loaded = append(loaded, m[0].RepoTags...)
		return nil
	}}
	pub, err := k.Publish(ctx, res)
	if err != nil {
		t.Fatal(err)
	}
	want := "manifold.local/x:sha256-" + res.Digest.Hex
	if pub.Reference != want || pub.Output != "kind:manifold" {
		t.Errorf("published %+v, want reference %s, output kind:manifold", pub, want)
	}
	if diff := cmp.Diff([]string{want}, loaded); diff != "" {
		t.Errorf("loaded tags (-want +got):\n%s", diff)
	}
	k.Load = func(context.Context, string) error { return errors.New("no kind cluster manifold") }
	if _, err := k.Publish(ctx, res); err == nil || err.Error() != "no kind cluster manifold" {
		t.Errorf("a failed load: got %v", err)
	}
}

// noCompiler fails the test if anything is compiled.
type noCompiler struct{ t *testing.T }

func (c noCompiler) Compile(context.Context, v1.Platform, string) (string, error) {
	c.t.Error("compiled although the base is unusable")
	return "", errors.New("no compiler")
}

// fakeCompiler writes a small file instead of building anything.
type fakeCompiler struct{}

func (fakeCompiler) Compile(_ context.Context, p v1.Platform, dir string) (string, error) {
	path := filepath.Join(dir, "fake-"+p.Architecture)
	return path, os.WriteFile(path, []byte("#!/bin/sh\necho fake\n"), 0o755)
}

func checkOneLine(t *testing.T, err error, mentions string) {
	t.Helper()
	t.Logf("error: %v", err)
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, mentions) {
		t.Errorf("error %q: want one line that mentions %q", msg, mentions)
	}
}

// TestBaseErrors: a base that does not exist, a registry that cannot be reached
// and a base without the platform are errors before anything is compiled.
func TestBaseErrors(t *testing.T) {
	host := startRegistry(t, nil)
	push(t, host+"/base:amd64", baseImage(t, amd64, false))
	pushIndex(t, host+"/base:index", baseImage(t, amd64, true))
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name      string
		base      string
		platforms []v1.Platform
		kind      error
		mentions  string
	}{
		{"no such repository", host + "/nope:v1", nil, image.ErrBaseNotFound, "--base"},
		{"no such tag", host + "/base:v2", nil, image.ErrBaseNotFound, "--base"},
		{"unreachable", strings.TrimPrefix(closed.URL, "http://") + "/base:v1", nil, image.ErrBaseNotFound, "--base"},
		{"image of another platform", host + "/base:amd64", []v1.Platform{arm64}, image.ErrBasePlatform, "--platform"},
		{"index without the platform", host + "/base:index", []v1.Platform{amd64, arm64}, image.ErrBasePlatform, "linux/arm64"},
		{"not a reference", "Base Image", nil, image.ErrBaseNotFound, "scratch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := image.NewBase(tc.base)
			if err == nil {
				b := &image.Builder{Compiler: noCompiler{t}, Base: base, Entrypoint: "/app/x", Platforms: tc.platforms}
				_, err = b.Build(context.Background())
			}
			if !errors.Is(err, tc.kind) {
				t.Fatalf("got %v, want %v", err, tc.kind)
			}
			checkOneLine(t, err, tc.mentions)
		})
	}
}

// TestPushRefused: a registry that refuses writes (401 or 403) is a clear error.
func TestPushRefused(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			host := startRegistry(t, func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Method != http.MethodGet && r.Method != http.MethodHead {
						http.Error(w, `{"errors":[{"code":"DENIED","message":"no writes here"}]}`, status)
						return
					}
					h.ServeHTTP(w, r)
				})
			})
			res, err := (&image.Builder{Compiler: fakeCompiler{}, Base: newBase(t, image.Scratch), Entrypoint: "/app/x"}).Build(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, err = image.Registry{Tag: mustTag(t, host+"/x:v1")}.Publish(context.Background(), res)
			if !errors.Is(err, image.ErrPushRefused) {
				t.Fatalf("got %v, want ErrPushRefused", err)
			}
			checkOneLine(t, err, "docker login "+host)
		})
	}
}

// TestGoBuildErrors: a program that does not build, a package that is not a main
// package and one that does not exist are clear errors.
func TestGoBuildErrors(t *testing.T) {
	root := exampletest.Root()
	broken := &image.GoBuild{Package: filepath.Join(root, "image", "testdata", "broken")}
	_, err := broken.Compile(context.Background(), amd64, t.TempDir())
	if !errors.Is(err, image.ErrBuild) {
		t.Fatalf("broken program: got %v, want ErrBuild", err)
	}
	checkOneLine(t, err, "main.go:5")

	for _, tc := range []struct {
		name     string
		gb       image.GoBuild
		mentions string
	}{
		{"not main", image.GoBuild{Package: filepath.Join(root, "sdk")}, "not a main package"},
		{"no such import path", image.GoBuild{Package: "github.com/manifoldflow/manifold/examples/nope", Dir: root}, "--package"},
		{"no such directory", image.GoBuild{Package: filepath.Join(root, "examples", "nope")}, "--package"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.gb.Check(context.Background())
			if !errors.Is(err, image.ErrBuild) {
				t.Fatalf("got %v, want ErrBuild", err)
			}
			checkOneLine(t, err, tc.mentions)
		})
	}
	path, dir, err := (&image.GoBuild{Package: "github.com/manifoldflow/manifold/examples/hello", Dir: root}).Check(context.Background())
	if err != nil || path != "github.com/manifoldflow/manifold/examples/hello" || dir != filepath.Join(root, "examples", "hello") {
		t.Errorf("Check of examples/hello: %q %q %v", path, dir, err)
	}
}

func TestParsePlatforms(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"linux/amd64"}},
		{[]string{"linux/amd64,linux/arm64"}, []string{"linux/amd64", "linux/arm64"}},
		{[]string{"linux/arm64", " linux/arm/v6 "}, []string{"linux/arm64", "linux/arm/v6"}},
		{[]string{"linux/arm"}, []string{"linux/arm/v7"}},
		{[]string{"linux/amd64/v3"}, []string{"linux/amd64/v3"}},
	} {
		ps, err := image.ParsePlatforms(tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.String())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.args, diff)
		}
	}
	for _, bad := range []string{"linux", "amd64", "windows/amd64", "linux/x86", "linux/amd64/v9", "linux/amd64/x/y", "linux//amd64", "linux/amd64,linux/amd64"} {
		if _, err := image.ParsePlatforms(bad); !errors.Is(err, image.ErrPlatform) {
			t.Errorf("%q: got %v, want ErrPlatform", bad, err)
		}
	}
}
