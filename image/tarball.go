package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// DigestTag returns the tag that names digest d in repo: REPOSITORY:sha256-<hex>.
// Image stores that load tarballs (docker load, kind load, ctr import) keep an
// image's tags but not the digest of its manifest, so a pod names a loaded image
// by this tag instead; it changes whenever the image does.
func DigestTag(repo name.Repository, d v1.Hash) name.Tag {
	return repo.Tag(d.Algorithm + "-" + d.Hex)
}

// Tarball writes the image as a `docker save` tarball (manifest.json, the config
// and gzipped layers), which `docker load`, `kind load image-archive`, `ctr
// images import` and `podman load` accept. It is tagged with DigestTag in
// Repository, the reference pods use, and with Tag when set. A tarball holds one
// platform.
type Tarball struct {
	Path       string
	Repository name.Repository
	Tag        *name.Tag
}

// Publish writes r to the tarball, through a temporary file renamed into place.
func (t Tarball) Publish(_ context.Context, r *Result) (Published, error) {
	if r.Image == nil {
		return Published{}, errorf(ErrPlatform, "a tarball holds one platform, and %d were built: give one --platform, or push the index to a registry with --push", len(r.Platforms))
	}
	ref := DigestTag(t.Repository, r.Digest)
	refs := map[name.Reference]v1.Image{ref: r.Image}
	tags := []string{ref.String()}
	if t.Tag != nil && t.Tag.String() != ref.String() {
		refs[*t.Tag] = r.Image
		tags = append(tags, t.Tag.String())
	}
	if err := writeTarball(t.Path, refs); err != nil {
		return Published{}, err
	}
	return Published{Reference: ref.String(), Tags: tags, Output: "tarball:" + t.Path}, nil
}

// writeTarball writes the tarball through a temporary file in the same
// directory, renamed into place, so that a reader never sees half of one. A
// tarball it replaces keeps its mode; a new one gets the umask's.
func writeTarball(path string, refs map[name.Reference]v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b atomicfile.Batch
	defer b.Abort()
	f, err := b.Create(path)
	if err != nil {
		return err
	}
	if err := tarball.MultiRefWrite(refs, f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return b.Commit()
}
