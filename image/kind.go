package image

import (
	"context"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
)

// Kind loads the image into the nodes of a kind cluster: it writes the image as
// a Tarball would and hands the file to Load, which imports it into every node
// as `kind load image-archive` does (the CLI passes package provision/kind's
// Load). Pods name the loaded image by its DigestTag in Repository; it is also
// tagged Tag, when set. One platform only, as for a tarball.
type Kind struct {
	Cluster    string
	Repository name.Repository
	Tag        *name.Tag
	// Load imports an image archive into the cluster's nodes.
	Load func(ctx context.Context, archive string) error
}

// Publish writes the image to a temporary archive and loads it.
func (k Kind) Publish(ctx context.Context, r *Result) (Published, error) {
	if k.Load == nil {
		return Published{}, errorf(ErrUnavailable, "loading into kind is not available here: use --tarball FILE and `kind load image-archive FILE --name %s`", k.Cluster)
	}
	dir, err := os.MkdirTemp("", "manifold-image-kind-")
	if err != nil {
		return Published{}, err
	}
	defer os.RemoveAll(dir)
	archive := filepath.Join(dir, "image.tar")
	pub, err := Tarball{Path: archive, Repository: k.Repository, Tag: k.Tag}.Publish(ctx, r)
	if err != nil {
		return Published{}, err
	}
	if err := k.Load(ctx, archive); err != nil {
		return Published{}, err
	}
	pub.Output = "kind:" + k.Cluster
	return pub, nil
}
