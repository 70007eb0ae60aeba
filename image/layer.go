package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/klauspost/compress/gzip"

	"github.com/manifoldflow/manifold/internal/atomicfile"
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

// layerLevel is the gzip level of the program's layer: klauspost/compress's
// default, about as small as the standard library's and three times faster.
const layerLevel = gzip.DefaultCompression

// layerFormat names how a layer is made from a program; a cached layer is used
// only by a build that makes layers the same way. Change it with anything that
// changes the layer's bytes for the same program.
const layerFormat = "manifold-layer-1 klauspost-gzip-6"

// layerKey is the cache key of the layer with diff ID (the digest of its tar
// stream) diffID and media type mt.
func layerKey(diffID v1.Hash, mt types.MediaType) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", layerFormat, diffID, mt)
	return hex.EncodeToString(h.Sum(nil))
}

// programLayer returns the layer holding the binary at entrypoint, with the media
// type that suits a base of manifest type mt, and whether it came from the
// cache. It is compressed once, with its digests computed on the way: into
// cache, where a later build of the same program finds it, or into memory when
// cache is empty.
func programLayer(binary, entrypoint string, t time.Time, mt types.MediaType, cache string) (v1.Layer, bool, error) {
	layerType := types.DockerLayer
	if mt == types.OCIManifestSchema1 {
		layerType = types.OCILayer
	}
	f, err := os.Open(binary)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if cache == "" {
		var buf bytes.Buffer
		l, err := compressLayer(&buf, f, fi.Size(), entrypoint, t, layerType, v1.Hash{})
		if err != nil {
			return nil, false, err
		}
		data := buf.Bytes()
		l.open = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
		return l.layer()
	}
	layers := filepath.Join(cache, "layers")
	if id, ok := goBuildID(f); ok {
		// A program that go build linked carries its content's hash in its build
		// ID: the layer needs no reading to be found.
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00go build ID\x00%s\x00%d\x00%s\x00%d\x00%s", layerFormat, id, fi.Size(), entrypoint, t.UnixNano(), layerType)
		return cachedLayer(layers, hex.EncodeToString(h.Sum(nil)), func(w io.Writer) (*storedLayer, error) {
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
			return compressLayer(w, f, fi.Size(), entrypoint, t, layerType, v1.Hash{})
		})
	}
	// Otherwise the tar stream's digest, the diff ID, names the layer in the
	// cache: a fraction of the time compressing takes.
	diffID := sha256.New()
	if err := writeLayerTar(diffID, f, fi.Size(), entrypoint, t); err != nil {
		return nil, false, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, false, err
	}
	id := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(diffID.Sum(nil))}
	return cachedLayer(layers, layerKey(id, layerType), func(w io.Writer) (*storedLayer, error) {
		return compressLayer(w, f, fi.Size(), entrypoint, t, layerType, id)
	})
}

// goBuildID returns the Go build ID of the ELF program f, when go build linked
// it: actionID/contentID of its main package, then of the link, the last the
// hash of the program's content, by which go build itself tells that a
// program is up to date.
func goBuildID(f *os.File) (string, bool) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return "", false
	}
	sec := ef.Section(".note.go.buildid")
	if sec == nil || sec.Size > 1<<10 {
		return "", false
	}
	note, err := sec.Data()
	// The note: name size, description size and type (4 bytes each, in the
	// file's byte order), the name "Go" padded to 4 bytes, the description.
	if err != nil || len(note) < 16 || string(note[12:16]) != "Go\x00\x00" {
		return "", false
	}
	if ef.ByteOrder.Uint32(note[0:4]) != 4 {
		return "", false
	}
	size := int(ef.ByteOrder.Uint32(note[4:8]))
	if size > len(note)-16 {
		return "", false
	}
	id := string(note[16 : 16+size])
	if parts := strings.Split(id, "/"); len(parts) != 4 || slices.Contains(parts, "") {
		return "", false
	}
	return id, true
}

// compressLayer writes the gzipped layer of the program to w and returns what
// describes it, in one pass: the compressed stream is hashed for the digest as
// it is written, and, unless diffID is known, the tar stream for the diff ID as
// it is compressed.
func compressLayer(w io.Writer, program io.Reader, size int64, entrypoint string, t time.Time, mt types.MediaType, diffID v1.Hash) (*storedLayer, error) {
	digest, tarDigest := sha256.New(), sha256.New()
	out := &countingWriter{w: io.MultiWriter(w, digest)}
	zw, err := gzip.NewWriterLevel(out, layerLevel)
	if err != nil {
		return nil, err
	}
	var tw io.Writer = zw
	if diffID.Hex == "" {
		tw = io.MultiWriter(zw, tarDigest)
	}
	if err := writeLayerTar(tw, program, size, entrypoint, t); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if diffID.Hex == "" {
		diffID = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(tarDigest.Sum(nil))}
	}
	return &storedLayer{
		Digest:    v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(digest.Sum(nil))},
		DiffID:    diffID,
		Size:      out.n,
		MediaType: mt,
	}, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// storedLayer is a compressed layer whose digests are known: it is read, never
// hashed again.
type storedLayer struct {
	Digest, DiffID v1.Hash
	Size           int64
	MediaType      types.MediaType

	open func() (io.ReadCloser, error)
}

// layer returns l as a v1.Layer.
func (l *storedLayer) layer() (v1.Layer, bool, error) {
	layer, err := partial.CompressedToLayer(compressed{l})
	return layer, false, err
}

// compressed is a storedLayer as go-containerregistry's partial.CompressedLayer
// and partial.WithDiffID.
type compressed struct{ l *storedLayer }

func (c compressed) Digest() (v1.Hash, error)            { return c.l.Digest, nil }
func (c compressed) DiffID() (v1.Hash, error)            { return c.l.DiffID, nil }
func (c compressed) Size() (int64, error)                { return c.l.Size, nil }
func (c compressed) MediaType() (types.MediaType, error) { return c.l.MediaType, nil }
func (c compressed) Compressed() (io.ReadCloser, error)  { return c.l.open() }

// cachedLayers is how many layers a cache keeps: the newest used, so that going
// back and forth between a few versions of a program stays fast while the cache
// stays within a few hundred megabytes.
const cachedLayers = 4

// cachedLayer returns the layer stored under key in dir, making it with build
// when it is not there yet (and storing it, through a temporary file renamed
// into place, so that a concurrent build never reads half of one), and whether
// it was there.
func cachedLayer(dir, key string, build func(io.Writer) (*storedLayer, error)) (v1.Layer, bool, error) {
	data, meta := filepath.Join(dir, key+".tar.gz"), filepath.Join(dir, key+".json")
	if l, err := openStored(data, meta); err == nil {
		now := time.Now()
		os.Chtimes(data, now, now) // the newest used, for trimCache
		layer, _, err := l.layer()
		return layer, true, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, false, err
	}
	var batch atomicfile.Batch
	defer batch.Abort()
	tmp, err := batch.Create(data)
	if err != nil {
		return nil, false, err
	}
	l, err := build(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, false, err
	}
	js, err := json.Marshal(l)
	if err != nil {
		return nil, false, err
	}
	// The description first: a layer file is used only beside one.
	if err := atomicfile.Write(meta, js); err != nil {
		return nil, false, err
	}
	if err := batch.Commit(); err != nil {
		return nil, false, err
	}
	l, err = openStored(data, meta)
	if err != nil {
		return nil, false, err
	}
	trimCache(dir, cachedLayers)
	layer, _, err := l.layer()
	return layer, false, err
}

// openStored returns the stored layer data described by meta, when the data
// has the digest meta says. Each reader opens the file anew: the cache keeps
// the newest layers, the one just used among them.
func openStored(data, meta string) (*storedLayer, error) {
	js, err := os.ReadFile(meta)
	if err != nil {
		return nil, err
	}
	var l storedLayer
	if err := json.Unmarshal(js, &l); err != nil {
		return nil, err
	}
	// The layer's file is checked against its digest, a small part of the time
	// compressing takes, so that a damaged cache never makes a damaged image.
	f, err := os.Open(data)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d, n, err := v1.SHA256(f)
	if err != nil {
		return nil, err
	}
	if d != l.Digest || n != l.Size {
		return nil, fmt.Errorf("cached layer %s: not %s", data, l.Digest)
	}
	l.open = func() (io.ReadCloser, error) { return os.Open(data) }
	return &l, nil
}

// trimCache removes all but the keep newest layers of dir. What it cannot
// remove it leaves: the cache is an optimisation.
func trimCache(dir string, keep int) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type layer struct {
		key string
		mod time.Time
	}
	var layers []layer
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), ".tar.gz")
		if !ok || strings.HasPrefix(key, ".") {
			continue
		}
		if fi, err := e.Info(); err == nil {
			layers = append(layers, layer{key, fi.ModTime()})
		}
	}
	if len(layers) <= keep {
		return
	}
	slices.SortFunc(layers, func(a, b layer) int { return b.mod.Compare(a.mod) })
	for _, l := range layers[keep:] {
		os.Remove(filepath.Join(dir, l.key+".tar.gz"))
		os.Remove(filepath.Join(dir, l.key+".json"))
	}
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
