// Package image builds the container image of a flow program without Docker or
// any daemon: it cross-compiles the program's main package with `go build` for
// each platform, adds the binary as one layer on top of a base image, sets the
// entrypoint to it, and publishes the result, named by digest.
//
// The build is a pipeline of small stages, each an interface with one file per
// implementation (as in ko's pkg/build and pkg/publish):
//
//	Compiler   the program for one platform           GoBuild (gobuild.go)
//	Base       the base image for one platform        Remote, Scratch (base.go)
//	Builder    binary + base → an image or an index   build.go, layer.go
//	Publisher  where the result goes                  Registry, Tarball, Kind
//	           (registry.go, tarball.go, kind.go)
//
// Builds are reproducible: the program is built with -trimpath, without cgo and
// without VCS stamps; the layer's entries have fixed times, owner and modes; the
// image's creation time is fixed (the Unix epoch unless Builder.Time says
// otherwise). The same source, Go toolchain and base give the same digest.
package image

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/manifoldflow/manifold/image/built"
)

// DefaultBase is the base image when none is named (built.DefaultBase).
const DefaultBase = built.DefaultBase

// Scratch names the empty base image.
const Scratch = "scratch"

// DefaultCacheDir returns where image builds keep their programs and layers
// between runs (GoBuild.CacheDir, Builder.CacheDir): manifold/image in the
// user's cache directory ($XDG_CACHE_HOME, else ~/.cache, on Linux).
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "manifold", "image"), nil
}

// DefaultPlatform is the platform built when none is asked for.
var DefaultPlatform = v1.Platform{OS: "linux", Architecture: "amd64"}

// Kinds of error, for errors.Is. Every error the stages return for these carries a
// one-line message that says what to do.
var (
	// ErrBaseNotFound: the base image does not exist.
	ErrBaseNotFound = errorKind("base image not found")
	// ErrBaseRefused: the base image's registry refused to serve it.
	ErrBaseRefused = errorKind("base image refused")
	// ErrBasePlatform: the base image has no image for a requested platform.
	ErrBasePlatform = errorKind("base image lacks a platform")
	// ErrBuild: the program does not build, or its package is not a main package.
	ErrBuild = errorKind("program does not build")
	// ErrPushRefused: the registry refused the push (HTTP 401 or 403).
	ErrPushRefused = errorKind("push refused")
	// ErrPlatform: a platform is not one this package builds.
	ErrPlatform = errorKind("bad platform")
	// ErrUnavailable: the output is not available here.
	ErrUnavailable = errorKind("not available")
)

type errorKind string

func (k errorKind) Error() string { return string(k) }

// kindError is an error of a kind, with its own message.
type kindError struct {
	kind errorKind
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

func errorf(kind errorKind, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// linuxArches are the architectures Go builds Linux programs for.
var linuxArches = []string{"386", "amd64", "arm", "arm64", "loong64", "mips", "mips64", "mips64le", "mipsle", "ppc64", "ppc64le", "riscv64", "s390x"}

// ParsePlatforms parses platforms written OS/ARCH[/VARIANT] (linux/amd64,
// linux/arm64, linux/arm/v7), each argument holding one or more separated by
// commas. None gives DefaultPlatform. linux/arm means linux/arm/v7.
func ParsePlatforms(args ...string) ([]v1.Platform, error) {
	var out []v1.Platform
	seen := map[string]bool{}
	for _, arg := range args {
		for s := range strings.SplitSeq(arg, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			p, err := parsePlatform(s)
			if err != nil {
				return nil, err
			}
			if seen[p.String()] {
				return nil, errorf(ErrPlatform, "platform %s is given twice: give each platform once", p)
			}
			seen[p.String()] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		out = append(out, DefaultPlatform)
	}
	return out, nil
}

func parsePlatform(s string) (v1.Platform, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
		return v1.Platform{}, errorf(ErrPlatform, "platform %q: write OS/ARCH, such as linux/amd64 or linux/arm64", s)
	}
	p := v1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	if p.OS != "linux" {
		return v1.Platform{}, errorf(ErrPlatform, "platform %q: pods run Linux images; write linux/%s", s, p.Architecture)
	}
	if !slices.Contains(linuxArches, p.Architecture) {
		return v1.Platform{}, errorf(ErrPlatform, "platform %q: Go does not build for %s; choose one of linux/%s", s, p.Architecture, strings.Join(linuxArches, ", linux/"))
	}
	switch {
	case p.Architecture == "arm" && p.Variant == "":
		p.Variant = "v7"
	case p.Variant == "":
	case p.Architecture == "arm" && slices.Contains([]string{"v5", "v6", "v7"}, p.Variant):
	case p.Architecture == "amd64" && slices.Contains([]string{"v1", "v2", "v3", "v4"}, p.Variant):
	case p.Architecture == "arm64" && p.Variant == "v8":
	default:
		return v1.Platform{}, errorf(ErrPlatform, "platform %q: variant %s is not one Go builds for %s; leave it out", s, p.Variant, p.Architecture)
	}
	return p, nil
}

// platformStrings returns the platforms as OS/ARCH[/VARIANT].
func platformStrings(ps []v1.Platform) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
