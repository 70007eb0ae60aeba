package image

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// RecordFile is where `<flow> image build` records the image it made, relative to
// the working directory, beside the runs in .manifold/runs.
const RecordFile = ".manifold/image.json"

// Record is the record of the flow program's image that `image build` writes to
// RecordFile. Compiled with it (compile --image-from-build, or image_from_build =
// true in manifold.toml), Reference becomes the image of every Run step.
type Record struct {
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

// ReadRecord reads the record image build left at path.
func ReadRecord(path string) (Record, error) {
	var b Record
	data, err := os.ReadFile(path)
	if err != nil {
		return b, err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return Record{}, fmt.Errorf("%s: %w: run image build again to rewrite it", path, err)
	}
	if b.Reference == "" {
		return Record{}, fmt.Errorf("%s: no image reference: run image build again to rewrite it", path)
	}
	return b, nil
}

// WriteRecord writes b to path, creating its directory; a reader never sees half
// a record.
func WriteRecord(path string, b Record) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}
