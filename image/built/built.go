// Package built is the record of the flow program's image that `image build`
// leaves beside the flow, which compile --image-from-build reads. It is apart
// from package image, the image builder, so that a program that only reads the
// record (every flow program, as its compile does) links none of the builder
// and its registry client.
package built

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/manifoldflow/manifold/internal/atomicfile"
)

// File is where `<flow> image build` records the image it made, relative to
// the working directory, beside the runs in .manifold/runs.
const File = ".manifold/image.json"

// DefaultBase is the base image when none is named: distroless's static image for
// Debian 12 (CA certificates, time zones, /etc/passwd; no shell, no libc), running
// as its nonroot user (uid 65532). Programs built without cgo need nothing more.
const DefaultBase = "gcr.io/distroless/static-debian12:nonroot"

// Record is the record of the flow program's image that `image build` writes to
// File. Compiled with it (compile --image-from-build, or image_from_build =
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

// Read reads the record image build left at path.
func Read(path string) (Record, error) {
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

// Write writes b to path, creating its directory; a reader never sees half a
// record.
func Write(path string, b Record) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, append(data, '\n'))
}
