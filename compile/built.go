package compile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// BuiltImageFile is where `<flow> image build` records the image it made, relative
// to the working directory, beside the runs in .manifold/runs.
const BuiltImageFile = ".manifold/image.json"

// BuiltImage is the record of the flow program's image that `image build` writes to
// BuiltImageFile. With Options.BuiltImage (compile --image-from-build), or
// image_from_build = true in manifold.toml, Reference becomes the image of every
// Run step.
type BuiltImage struct {
	// Flow is the name of the flow whose program the image holds.
	Flow string `json:"flow"`
	// Reference is what a pod names to get the image: REPOSITORY@sha256:… when it
	// was pushed to a registry; a tag that names the digest (REPOSITORY:sha256-…)
	// when it was written to a tarball or loaded into kind, as image stores that
	// load tarballs (kind, docker load) keep tags but not manifest digests.
	Reference string `json:"reference"`
	// Digest is the digest of the image's manifest (or of its index, with several
	// platforms).
	Digest string `json:"digest"`
	// Tags are the tags it was published under.
	Tags []string `json:"tags,omitempty"`
	// Platforms are the image's platforms, such as linux/amd64.
	Platforms []string `json:"platforms"`
	// Base is the base image, as it was named.
	Base string `json:"base"`
	// Entrypoint is the path of the flow program in the image.
	Entrypoint string `json:"entrypoint"`
	// Output says where the image went: "registry", "tarball:FILE" or
	// "kind:CLUSTER".
	Output string `json:"output"`
	// Built is when the build ran (the image's own timestamps are fixed).
	Built time.Time `json:"built"`
}

// ReadBuiltImage reads the record image build left at path.
func ReadBuiltImage(path string) (BuiltImage, error) {
	var b BuiltImage
	data, err := os.ReadFile(path)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return BuiltImage{}, fmt.Errorf("%s: %w: run image build again to rewrite it", path, err)
	}
	if b.Reference == "" {
		return BuiltImage{}, fmt.Errorf("%s: no image reference: run image build again to rewrite it", path)
	}
	return b, nil
}

// WriteBuiltImage writes b to path, creating its directory; a reader never sees
// half a record.
func WriteBuiltImage(path string, b BuiltImage) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}

// runImage returns the image that replaces every Run step's own, if any: the one
// in o.BuiltImage, else, with image_from_build in the config, the one recorded in
// BuiltImageFile. It checks that the image holds this flow's program.
func runImage(flow string, o Options) (string, *field.Path, field.ErrorList) {
	at := field.NewPath("imageFromBuild")
	b := o.BuiltImage
	if b == nil && o.Config.ImageFromBuild {
		at = field.NewPath("config", "image_from_build")
		read, err := ReadBuiltImage(BuiltImageFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", nil, field.ErrorList{field.Required(at, "no image has been built here ("+BuiltImageFile+" does not exist): run `"+flow+" image build --push --tag REF` first, or remove image_from_build from "+ConfigFile)}
		case err != nil:
			return "", nil, field.ErrorList{field.Invalid(at, BuiltImageFile, err.Error())}
		}
		b = &read
	}
	if b == nil {
		return "", nil, nil
	}
	if b.Flow != flow {
		return "", nil, field.ErrorList{field.Invalid(at, b.Reference, fmt.Sprintf("the image was built for flow %q, not %q: run `%s image build` for this flow", b.Flow, flow, flow))}
	}
	return b.Reference, at, nil
}
