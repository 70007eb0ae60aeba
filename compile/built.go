package compile

import (
	"errors"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/image/built"
)

// runImage returns the image that replaces every Run step's own, if any: the one
// in o.BuiltImage, else, with image_from_build in the config, the one
// o.ReadBuiltImage reads; and the base image it was built on. It checks that the
// image holds this flow's program.
func runImage(flow string, o Options) (string, string, *field.Path, field.ErrorList) {
	at := field.NewPath("imageFromBuild")
	b := o.BuiltImage
	if b == nil && o.Config.ImageFromBuild {
		at = field.NewPath("config", "image_from_build")
		read, err := built.Record{}, error(fs.ErrNotExist)
		if o.ReadBuiltImage != nil {
			read, err = o.ReadBuiltImage()
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", "", nil, field.ErrorList{field.Required(at, "no image has been built here ("+built.File+" does not exist): run `"+flow+" image build --push --tag REF` first, or remove image_from_build from "+ConfigFile)}
		case err != nil:
			return "", "", nil, field.ErrorList{field.Invalid(at, built.File, err.Error())}
		}
		b = &read
	}
	if b == nil {
		return "", "", nil, nil
	}
	if b.Flow != flow {
		return "", "", nil, field.ErrorList{field.Invalid(at, b.Reference, fmt.Sprintf("the image was built for flow %q, not %q: run `%s image build` for this flow", b.Flow, flow, flow))}
	}
	return b.Reference, b.Base, at, nil
}

// nonRootBase reports whether the flow's own image, built on base (as `image
// build` names it; "" when no build is recorded, and then config's base_image,
// which image build uses), is known to run as a non-root user: only the
// default base, distroless's :nonroot (uid 65532), is.
func nonRootBase(base string, c Config) bool {
	if base == "" {
		base = c.BaseImage
	}
	return base == "" || base == built.DefaultBase
}
