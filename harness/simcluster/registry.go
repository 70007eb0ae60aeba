package simcluster

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is the OCI registry of the real nodes, on a loopback port: containerd
// pulls every image from it, whatever registry the image names (see
// MirroredHosts), so no image is ever fetched from elsewhere.
type Registry struct {
	// Host is the registry's host:port on 127.0.0.1.
	Host string

	srv *http.Server
	ln  net.Listener
}

// MirroredHosts are the registry hosts a real node's containerd pulls from the
// loopback registry: a pod's image docker.io/library/busybox:1.37 is the
// registry's library/busybox:1.37. An image of any other host is refused by a
// loopback proxy (Registry.refuse), never fetched.
var MirroredHosts = []string{"docker.io", "registry.k8s.io", "public.ecr.aws", "quay.io", "ghcr.io", "gcr.io", "nvcr.io"}

// PauseImage is the sandbox image of the real nodes' pods.
const PauseImage = "registry.k8s.io/pause:3.10"

// Registry returns the cluster's loopback registry, starting it the first time,
// with the pause image in it.
func (c *Cluster) Registry(ctx context.Context) (*Registry, error) {
	c.registry.once.Do(func() { c.registry.r, c.registry.err = c.startRegistry(ctx) })
	return c.registry.r, c.registry.err
}

func (c *Cluster) startRegistry(ctx context.Context) (*Registry, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Registry{Host: ln.Addr().String(), ln: ln}
	r.srv = &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	c.cleanups = append(c.cleanups, func() { r.srv.Close() })
	pause, err := BusyboxImage([]string{"/bin/busybox", "sleep", "2147483647"})
	if err != nil {
		return nil, fmt.Errorf("the pause image: %w", err)
	}
	if err := r.Push(ctx, PauseImage, pause); err != nil {
		return nil, err
	}
	return r, nil
}

// Ref returns where image ref (as a pod names it) is kept in the registry:
// docker.io/library/busybox:1.37 → HOST/library/busybox:1.37.
func (r *Registry) Ref(ref string) (name.Reference, error) {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return nil, err
	}
	repo := parsed.Context().RepositoryStr()
	switch p := parsed.(type) {
	case name.Digest:
		return name.NewDigest(r.Host+"/"+repo+"@"+p.DigestStr(), name.Insecure)
	default:
		return name.NewTag(r.Host+"/"+repo+":"+parsed.Identifier(), name.Insecure)
	}
}

// Push puts img in the registry under the name a pod uses for it (see Ref).
func (r *Registry) Push(ctx context.Context, ref string, img v1.Image) error {
	to, err := r.Ref(ref)
	if err != nil {
		return err
	}
	if err := remote.Write(to, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("pushing %s to the loopback registry: %w", ref, err)
	}
	return nil
}

// PushBusybox puts BusyboxImage (no entrypoint: the pod's command says what
// runs) in the registry under ref, as a pod names it ("busybox:1.37").
func (r *Registry) PushBusybox(ctx context.Context, ref string) error {
	img, err := BusyboxImage(nil)
	if err != nil {
		return err
	}
	return r.Push(ctx, ref, img)
}

// BusyboxPath is the static busybox of Debian's busybox-static package, which
// BusyboxImage packages.
const BusyboxPath = "/bin/busybox"

// BusyboxImage returns a linux/amd64 image holding the machine's static busybox
// as /bin/busybox with /bin/sh and the usual applets linked to it, running
// entrypoint (nil for none: the pod's command says what runs).
func BusyboxImage(entrypoint []string) (v1.Image, error) {
	data, err := os.ReadFile(BusyboxPath)
	if err != nil {
		return nil, fmt.Errorf("%w: install Debian's busybox-static", err)
	}
	return binaryImage("bin/busybox", data, []string{"sh", "echo", "cat", "sleep", "true", "false", "ls", "env", "head", "tail", "dd", "test", "printf", "mkdir", "rm", "cp", "wc", "grep", "sed", "seq"}, entrypoint)
}

// ArgoExecImage is the image of Argo's executor the workflow-controller names
// (--executor-image): the real nodes pull it from the loopback registry.
const ArgoExecImage = "quay.io/argoproj/argoexec:" + ArgoVersion

// argoExecImage returns an image of the argoexec binary built into the tools'
// directory bin, at /bin/argoexec (the controller runs `argoexec init` and
// `argoexec wait`; init copies it for the emissary, found on PATH).
func argoExecImage(bin string) (v1.Image, error) {
	data, err := os.ReadFile(filepath.Join(bin, "argoexec"))
	if err != nil {
		return nil, fmt.Errorf("%w: run make sim-tools", err)
	}
	return binaryImage("bin/argoexec", data, nil, nil)
}

// binaryImage returns a linux/amd64 image of one static program at path (under
// bin/), with links (names in bin/) to it, the directories a program expects
// (/tmp writable by all), PATH=/bin, and entrypoint.
func binaryImage(path string, data []byte, links, entrypoint []string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"bin/", "tmp/", "proc/", "dev/", "sys/", "etc/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode}); err != nil {
			return nil, err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path, Mode: 0o755, Size: int64(len(data))}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	for _, link := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + link, Linkname: filepath.Base(path), Mode: 0o777}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.Env = []string{"PATH=/bin"}
	return mutate.ConfigFile(img, cfg)
}

// refusingProxy is the HTTP(S) proxy of every real node's containerd: any pull
// that a mirror does not serve reaches it, on loopback, and is refused; the hosts
// asked are kept for tests to see.
type refusingProxy struct {
	ln    net.Listener
	srv   *http.Server
	mu    sync.Mutex
	hosts []string
}

func startRefusingProxy() (*refusingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &refusingProxy{ln: ln}
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p.mu.Lock()
		p.hosts = append(p.hosts, req.Host)
		p.mu.Unlock()
		http.Error(w, "the simulated cluster pulls images only from its loopback registry", http.StatusForbidden)
	})}
	go p.srv.Serve(ln)
	return p, nil
}

// URL is the proxy's address, for HTTPS_PROXY and HTTP_PROXY.
func (p *refusingProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Asked returns the hosts containerd tried to reach outside the mirrors.
func (p *refusingProxy) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.hosts...)
}

func (p *refusingProxy) close() { p.srv.Close() }

// hostsToml is containerd's hosts.toml for one registry host: pull it from the
// loopback registry, over HTTP.
func hostsToml(registryHost string) string {
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+registryHost, "http://"+registryHost)
}
