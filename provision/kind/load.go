package kind

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/kind/pkg/cluster/nodeutils"

	"github.com/manifoldflow/manifold/runtimes/display"
)

// LoadOptions configure Load.
type LoadOptions struct {
	// Name is the cluster's name; "" is DefaultName.
	Name string
	// Image is an image archive (a tarball written by docker save, podman save or
	// an OCI image layout tarball) or the reference of an image the container
	// engine holds (registry.example.com/ml/flow:v1).
	Image string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Source is what Load loads: an archive file, or an image of the container
// engine.
type Source struct {
	// Archive is the path of an image archive, or "".
	Archive string
	// Ref is an image reference, or "".
	Ref string
}

// archiveSuffixes mark an argument as meant to be an archive file.
var archiveSuffixes = []string{".tar", ".tar.gz", ".tgz", ".oci", ".docker"}

// reference is an image reference: [host[:port]/]path[:tag][@digest], path
// components lowercase.
var reference = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@[a-z0-9]+(?:[+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?$`)
})

// Resolve says what arg names: an existing file is an archive; an argument that
// looks like a path (it starts with /, ./, ../ or ~, or ends in .tar, .tar.gz,
// .tgz, .oci or .docker) but names no file is an error; anything else must be
// an image reference.
func Resolve(arg string) (Source, error) {
	if arg == "" {
		return Source{}, errors.New("no image given: name an image archive (docker save -o flow.tar IMAGE) or an image reference")
	}
	info, err := os.Stat(arg)
	switch {
	case err == nil && info.IsDir():
		return Source{}, fmt.Errorf("%s is a directory; give an image archive (a tarball of docker save, or of an OCI image layout) or an image reference", arg)
	case err == nil:
		return Source{Archive: arg}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return Source{}, fmt.Errorf("image archive %s: %w", arg, err)
	}
	if looksLikePath(arg) {
		return Source{}, fmt.Errorf("image archive %s: no such file; write one with docker save -o %s IMAGE, or give an image reference", arg, arg)
	}
	if !reference().MatchString(arg) {
		return Source{}, fmt.Errorf("%q is neither a file nor an image reference (such as registry.example.com/ml/flow:v1); check the spelling: references are lowercase", arg)
	}
	return Source{Ref: arg}, nil
}

func looksLikePath(arg string) bool {
	for _, p := range []string{"/", "./", "../", "~"} {
		if strings.HasPrefix(arg, p) {
			return true
		}
	}
	for _, s := range archiveSuffixes {
		if strings.HasSuffix(arg, s) {
			return true
		}
	}
	return false
}

// Load loads an image into every node of kind cluster o.Name, as `kind load
// image-archive` does: an archive as it is; an image reference by saving it from
// the container engine into an archive first (`docker save`).
func Load(ctx context.Context, o LoadOptions) error {
	name := cmp.Or(o.Name, DefaultName)
	if err := CheckName(name); err != nil {
		return err
	}
	src, err := Resolve(o.Image)
	if err != nil {
		return err
	}
	log := newLogger(o.Log)
	provider, eng, err := newProvider(ctx, log)
	if err != nil {
		return err
	}
	list, err := provider.ListInternalNodes(name)
	if err != nil {
		return engineErr(fmt.Sprintf("list the nodes of kind cluster %s with %s", name, eng.binary), err)
	}
	if len(list) == 0 {
		return fmt.Errorf("there is no kind cluster %s; make it with kind up%s", name, nameFlag(name))
	}
	archive := src.Archive
	if src.Ref != "" {
		dir, err := os.MkdirTemp("", "manifold-kind-load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		archive = filepath.Join(dir, "image.tar")
		if err := save(ctx, eng.binary, src.Ref, archive); err != nil {
			return err
		}
	}
	log.printf("loading %s into %s of kind cluster %s", o.Image, display.Count(len(list), "node"), name)
	var wg sync.WaitGroup
	errs := make([]error, len(list))
	for i, n := range list {
		wg.Go(func() { errs[i] = loadArchive(archive, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.printf("loaded %s: pods of kind cluster %s run it without pulling (with imagePullPolicy IfNotPresent, the default for a tag other than latest)", o.Image, name)
	return nil
}

// save writes image ref of the container engine binary into archive.
func save(ctx context.Context, binary, ref, archive string) error {
	var stderr bytes.Buffer
	inspect := exec.CommandContext(ctx, binary, "image", "inspect", ref)
	inspect.Stderr = &stderr
	if err := inspect.Run(); err != nil {
		return fmt.Errorf("image %s is not among the images of %s; build or pull it first (%s pull %s), or give an image archive", ref, binary, binary, ref)
	}
	stderr.Reset()
	cmd := exec.CommandContext(ctx, binary, "save", "-o", archive, ref)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s save %s: %v: %s", binary, ref, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// loadArchive imports the image archive into node n's containerd.
func loadArchive(archive string, n nodes.Node) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := nodeutils.LoadImageArchive(n, f); err != nil {
		return engineErr(fmt.Sprintf("load the image into node %s", n), err)
	}
	return nil
}

// Down deletes kind cluster name ("" is DefaultName) and its kubeconfig
// context. A cluster that does not exist is reported to log, not an error.
func Down(ctx context.Context, name string, log io.Writer) error {
	name = cmp.Or(name, DefaultName)
	if err := CheckName(name); err != nil {
		return err
	}
	l := newLogger(log)
	provider, eng, err := newProvider(ctx, l)
	if err != nil {
		return err
	}
	clusters, err := provider.List()
	if err != nil {
		return engineErr(fmt.Sprintf("list the kind clusters of %s", eng.binary), err)
	}
	if !slices.Contains(clusters, name) {
		l.printf("there is no kind cluster %s; nothing to delete", name)
		return nil
	}
	l.printf("deleting kind cluster %s", name)
	if err := provider.Delete(name, ""); err != nil {
		return engineErr(fmt.Sprintf("delete kind cluster %s", name), err)
	}
	l.printf("deleted kind cluster %s and its kubeconfig context kind-%s", name, name)
	return nil
}
