package image

import "context"

// A Publisher puts a built image where a cluster can get it, and says how pods
// name it.
type Publisher interface {
	Publish(ctx context.Context, r *Result) (Published, error)
}

var (
	_ Publisher = Registry{}
	_ Publisher = Tarball{}
	_ Publisher = Kind{}
)

// Published says where an image went.
type Published struct {
	// Reference is what a pod names to get the image.
	Reference string
	// Tags are the tags it was published under.
	Tags []string
	// Output says where it went: "registry", "tarball:FILE" or "kind:CLUSTER".
	Output string
}
