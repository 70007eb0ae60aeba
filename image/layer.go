package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CheckEntrypoint checks that entrypoint can be the program's path in an image:
// an absolute, clean path below /.
func CheckEntrypoint(entrypoint string) error {
	if !path.IsAbs(entrypoint) || path.Clean(entrypoint) != entrypoint || entrypoint == "/" ||
		strings.ContainsAny(entrypoint, " \t\n\\") {
		return fmt.Errorf("entrypoint %q must be a clean absolute path without spaces, such as /usr/local/bin/flow; fix entrypoint in manifold.toml", entrypoint)
	}
	return nil
}

// writeLayerTar writes a tar stream holding the program at entrypoint (mode 0755)
// and the directories above it (0755), all owned by root, all at time t.
func writeLayerTar(w io.Writer, program io.Reader, size int64, entrypoint string, t time.Time) error {
	tw := tar.NewWriter(w)
	rel := strings.TrimPrefix(entrypoint, "/")
	parts := strings.Split(rel, "/")
	for i := 1; i < len(parts); i++ {
		hdr := &tar.Header{
			Typeflag: tar.TypeDir,
			Name:     strings.Join(parts[:i], "/") + "/",
			Mode:     0o755,
			ModTime:  t,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
	}
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     rel,
		Mode:     0o755,
		Size:     size,
		ModTime:  t,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if n, err := io.Copy(tw, program); err != nil {
		return err
	} else if n != size {
		return fmt.Errorf("the program changed size while it was read (%d bytes, not %d)", n, size)
	}
	return tw.Close()
}

// programLayer returns the layer holding the binary at entrypoint, compressed
// once, in memory, with the media type that suits a base of manifest type mt.
func programLayer(binary, entrypoint string, t time.Time, mt types.MediaType) (v1.Layer, error) {
	f, err := os.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if err := writeLayerTar(zw, f, fi.Size(), entrypoint, t); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	layerType := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		layerType = types.OCILayer
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(layerType))
}

// withProgram returns base with the layer on top, the program as its entrypoint
// (and no command), p as its platform, and t as its creation time. The base's
// environment, user and working directory stay.
func withProgram(base v1.Image, layer v1.Layer, p v1.Platform, entrypoint string, t time.Time) (v1.Image, error) {
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: t},
			CreatedBy: "manifold image build",
			Comment:   "the flow program at " + entrypoint,
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Architecture
	if p.Variant != "" {
		cf.Variant = p.Variant
	}
	cf.Created = v1.Time{Time: t}
	cf.Config.Entrypoint = []string{entrypoint}
	cf.Config.Cmd = nil
	return mutate.ConfigFile(img, cf)
}
