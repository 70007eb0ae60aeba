package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Builder builds the flow program's image: for each platform, the base's image
// for it with one more layer, the program at Entrypoint.
type Builder struct {
	Compiler Compiler
	Base     Base
	// Entrypoint is the program's path in the image (see CheckEntrypoint).
	Entrypoint string
	// Platforms are the platforms to build; none means DefaultPlatform. Several
	// make an index.
	Platforms []v1.Platform
	// Time is the time of the image, its history entry and the layer's files;
	// zero means the Unix epoch. Anything but a fixed time makes builds differ.
	Time time.Time
	// Progress, when set, is told what happens, one line at a time.
	Progress func(line string)
	// CacheDir, when set, keeps the program's compressed layers (in
	// CacheDir/layers, the few newest), so that building an unchanged program
	// again compresses nothing; see DefaultCacheDir.
	CacheDir string
}

// Result is what Builder.Build made.
type Result struct {
	// Image is the image, when one platform was built; Index holds one image per
	// platform otherwise.
	Image v1.Image
	Index v1.ImageIndex
	// Digest is the digest of Image's manifest, or of Index's.
	Digest v1.Hash
	// Platforms says what was built for each platform, in the order asked.
	Platforms []Platform
}

// Platform is the build for one platform.
type Platform struct {
	Platform v1.Platform
	Image    v1.Image
	// ProgramSize is the size of the binary; LayerSize that of its compressed layer.
	ProgramSize, LayerSize int64
	// Compile is how long go build took.
	Compile time.Duration
	// LayerCached says that the layer was the one cached for the same program.
	LayerCached bool
}

// PlatformNames returns the result's platforms, such as linux/amd64.
func (r *Result) PlatformNames() []string {
	ps := make([]v1.Platform, len(r.Platforms))
	for i, p := range r.Platforms {
		ps[i] = p.Platform
	}
	return platformStrings(ps)
}

func (b *Builder) progress(format string, args ...any) {
	if b.Progress != nil {
		b.Progress(fmt.Sprintf(format, args...))
	}
}

// Build builds the image. It fetches every platform's base first, so that a
// missing base fails before any compiling.
func (b *Builder) Build(ctx context.Context) (*Result, error) {
	if b.Compiler == nil || b.Base == nil {
		return nil, errors.New("image: a Builder needs a Compiler and a Base")
	}
	if err := CheckEntrypoint(b.Entrypoint); err != nil {
		return nil, err
	}
	platforms := b.Platforms
	if len(platforms) == 0 {
		platforms = []v1.Platform{DefaultPlatform}
	}
	t := b.Time
	if t.IsZero() {
		t = time.Unix(0, 0).UTC()
	}
	bases := make([]v1.Image, len(platforms))
	for i, p := range platforms {
		base, err := b.Base.Image(ctx, p)
		if err != nil {
			return nil, err
		}
		bases[i] = base
	}
	dir, err := os.MkdirTemp("", "manifold-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	res := &Result{}
	for i, p := range platforms {
		built, err := b.buildPlatform(ctx, p, bases[i], dir, t)
		if err != nil {
			return nil, err
		}
		res.Platforms = append(res.Platforms, built)
	}

	if len(res.Platforms) == 1 {
		res.Image = res.Platforms[0].Image
		res.Digest, err = res.Image.Digest()
		if err != nil {
			return nil, fmt.Errorf("base image %s: %w", b.Base, err)
		}
		return res, nil
	}
	if res.Index, err = index(res.Platforms); err != nil {
		return nil, err
	}
	if res.Digest, err = res.Index.Digest(); err != nil {
		return nil, fmt.Errorf("base image %s: %w", b.Base, err)
	}
	return res, nil
}

// buildPlatform builds the image of platform p: the program compiled in dir,
// in a layer stamped with time t, on base.
func (b *Builder) buildPlatform(ctx context.Context, p v1.Platform, base v1.Image, dir string, t time.Time) (Platform, error) {
	start := time.Now()
	binary, err := b.Compiler.Compile(ctx, p, dir)
	if err != nil {
		return Platform{}, err
	}
	built := Platform{Platform: p, Compile: time.Since(start)}
	fi, err := os.Stat(binary)
	if err != nil {
		return Platform{}, err
	}
	built.ProgramSize = fi.Size()
	mt, err := base.MediaType()
	if err != nil {
		return Platform{}, fmt.Errorf("base image %s for %s: %w", b.Base, p, err)
	}
	layer, cached, err := programLayer(binary, b.Entrypoint, t, mt, b.CacheDir)
	if err != nil {
		return Platform{}, err
	}
	built.LayerCached = cached
	if built.LayerSize, err = layer.Size(); err != nil {
		return Platform{}, err
	}
	if built.Image, err = withProgram(base, layer, p, b.Entrypoint, t); err != nil {
		return Platform{}, fmt.Errorf("base image %s for %s: %w", b.Base, p, err)
	}
	how := ""
	if cached {
		how = " (cached)"
	}
	b.progress("%s: go build in %.1fs, program %s, layer %s%s", p, built.Compile.Seconds(), mib(built.ProgramSize), mib(built.LayerSize), how)
	return built, nil
}

// index makes the index of the platforms' images: a Docker manifest list when
// every image is a Docker image, else an OCI index.
func index(platforms []Platform) (v1.ImageIndex, error) {
	indexType := types.DockerManifestList
	adds := make([]mutate.IndexAddendum, len(platforms))
	for i, p := range platforms {
		mt, err := p.Image.MediaType()
		if err != nil {
			return nil, err
		}
		if mt != types.DockerManifestSchema2 {
			indexType = types.OCIImageIndex
		}
		cf, err := p.Image.ConfigFile()
		if err != nil {
			return nil, err
		}
		adds[i] = mutate.IndexAddendum{Add: p.Image, Descriptor: v1.Descriptor{Platform: cf.Platform()}}
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, indexType), adds...), nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
