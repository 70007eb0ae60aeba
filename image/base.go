package image

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// A Base gives the image that the program built for a platform is added to.
type Base interface {
	Image(ctx context.Context, p v1.Platform) (v1.Image, error)
	// String is the base's name, as it was given.
	String() string
}

var (
	_ Base = (*Remote)(nil)
	_ Base = ScratchBase{}
)

// NewBase returns the base named ref: Scratch for the empty image, else an image
// in a registry, fetched with opts (such as remote.WithAuthFromKeychain).
func NewBase(ref string, opts ...remote.Option) (Base, error) {
	if ref == Scratch {
		return ScratchBase{}, nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, errorf(ErrBaseNotFound, "base image %q is not an image reference (%v): write REGISTRY/REPOSITORY[:TAG][@DIGEST], or %s for an empty base", ref, err, Scratch)
	}
	return &Remote{Ref: r, Options: opts, name: ref}, nil
}

// Remote is a base image in a registry: an image, or an index with an image per
// platform.
type Remote struct {
	Ref     name.Reference
	Options []remote.Option
	name    string

	once sync.Once
	desc *remote.Descriptor
	err  error
}

func (r *Remote) String() string {
	if r.name != "" {
		return r.name
	}
	return r.Ref.String()
}

// fetch gets the base's manifest once.
func (r *Remote) fetch(ctx context.Context) (*remote.Descriptor, error) {
	r.once.Do(func() {
		r.desc, r.err = remote.Get(r.Ref, append(append([]remote.Option(nil), r.Options...), remote.WithContext(ctx))...)
		if r.err != nil {
			r.err = r.fetchErr(r.err)
		}
	})
	return r.desc, r.err
}

func (r *Remote) fetchErr(err error) error {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return errorf(ErrBaseNotFound, "cannot fetch base image %s: %v: check the network and the name, or choose another base (--base, or base_image in manifold.toml; %s needs no registry)", r, err, Scratch)
	}
	switch {
	case isNotFound(terr):
		return errorf(ErrBaseNotFound, "base image %s does not exist (%v): check its name and tag, or choose another base (--base, or base_image in manifold.toml)", r, err)
	case terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden:
		return errorf(ErrBaseRefused, "registry %s refused base image %s (%s): log in to it (docker login %s), or choose another base (--base, or base_image in manifold.toml)", r.Ref.Context().RegistryStr(), r, http.StatusText(terr.StatusCode), r.Ref.Context().RegistryStr())
	}
	return errorf(ErrBaseNotFound, "cannot fetch base image %s: %v: choose another base (--base, or base_image in manifold.toml)", r, err)
}

func isNotFound(terr *transport.Error) bool {
	if terr.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range terr.Errors {
		switch d.Code {
		case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode:
			return true
		}
	}
	return false
}

// Image returns the base image for p: the index's image for p, or the image
// itself when it is for p or says no platform.
func (r *Remote) Image(ctx context.Context, p v1.Platform) (v1.Image, error) {
	desc, err := r.fetch(ctx)
	if err != nil {
		return nil, err
	}
	switch desc.MediaType {
	case types.OCIImageIndex, types.DockerManifestList:
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, err
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, err
		}
		var have []string
		for _, child := range m.Manifests {
			if child.Platform == nil || child.Platform.OS == "unknown" {
				continue // attestations and the like
			}
			if matches(*child.Platform, p) {
				return idx.Image(child.Digest)
			}
			have = append(have, child.Platform.String())
		}
		return nil, errorf(ErrBasePlatform, "base image %s has no %s image (it has %s): choose a base with one, or leave %s out of --platform", r, p, strings.Join(have, ", "), p)
	}
	img, err := desc.Image()
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	if cf.OS != "" && cf.Architecture != "" && !matches(v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}, p) {
		have := v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}
		return nil, errorf(ErrBasePlatform, "base image %s is for %s, not %s: choose a base with a %s image, or leave %s out of --platform", r, have.String(), p, p, p)
	}
	return img, nil
}

// matches says whether an image for have runs programs built for want.
func matches(have, want v1.Platform) bool {
	if have.OS != want.OS || have.Architecture != want.Architecture {
		return false
	}
	if want.Variant == "" || have.Variant == want.Variant {
		return true
	}
	// arm64 images often say v8, the only variant Go builds for.
	return want.Architecture == "arm64" && have.Variant == ""
}

// ScratchBase is the empty base image: the program is the image's only file.
// Programs built without cgo run there; they find no CA certificates, time zones
// or users, and run as root unless the pod says otherwise.
type ScratchBase struct{}

func (ScratchBase) String() string { return Scratch }

// Image returns an empty OCI image for p.
func (ScratchBase) Image(_ context.Context, p v1.Platform) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	return mutate.ConfigFile(img, cf)
}
