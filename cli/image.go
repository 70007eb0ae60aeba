//go:build !manifold_image

package cli

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/image"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/provision/kind"
	"github.com/manifoldflow/manifold/sdk"
)

// localRepository is the repository of an image written to a tarball when no
// --tag names one: a name no registry answers to, so that a node never tries to
// pull it.
const localRepository = "manifold.local/"

func imageCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:        "image",
		Usage:       "build the flow program's container image",
		Subcommands: []*ucli.Command{imageBuildCommand(flow)},
	}
}

func imageBuildCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "build",
		Usage: "build this flow program into an image, without Docker, and push it or write it to a tarball",
		Description: "Builds the flow's main package with `go build` (CGO_ENABLED=0, -trimpath, GOOS=linux, one GOARCH\n" +
			"per --platform), adds the program as one layer at the entrypoint (manifold.toml's entrypoint, default\n" +
			"/usr/local/bin/<flow>) on the base image (--base, else manifold.toml's base_image, else\n" +
			image.DefaultBase + "; scratch for none) and makes it the image's entrypoint.\n" +
			"Two platforms or more make an index. The same source and base give the same digest.\n\n" +
			"The program in the image is built with -tags " + image.ImageBuildTags + ", which leave out what\n" +
			"only a workstation runs (run --kube, check, image, kind: there they say so and exit 2).\n\n" +
			"The program and its compressed layer are kept in the user's cache directory (manifold/image), so\n" +
			"building an unchanged program again links and compresses nothing.\n\n" +
			"--push pushes to --tag (default: the flow's sdk.Image, else manifold.toml's image) with the\n" +
			"credentials of the docker config and its credential helpers; pods name the image by digest.\n" +
			"--tarball writes a `docker save` tarball for `kind load image-archive` or `docker load`; pods name\n" +
			"it by a tag made from its digest (REPOSITORY:sha256-<hex>); --kind NAME loads that tarball into every\n" +
			"node of a kind cluster. The reference is printed last and\n" +
			"recorded in " + built.File + ", where `compile --image-from-build` (or image_from_build = true in\n" +
			"manifold.toml) finds it for every Run step.\n\n" +
			"The flow's main package is the one this program was built from (found through its build info\n" +
			"and the go command of the working directory's module); --package DIR names another.",
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "base", Usage: "the base `IMAGE` (default: manifold.toml's base_image, else " + image.DefaultBase + "); scratch for an empty one"},
			&ucli.StringSliceFlag{Name: "platform", Usage: "build for `OS/ARCH`, such as linux/amd64 (the default) or linux/amd64,linux/arm64 (several make an index)"},
			&ucli.StringFlag{Name: "tag", Usage: "the image's `REF`, REGISTRY/REPOSITORY[:TAG] (default: the flow's sdk.Image, else manifold.toml's image)"},
			&ucli.BoolFlag{Name: "push", Usage: "push the image to the registry of --tag"},
			&ucli.StringFlag{Name: "tarball", Usage: "write the image to `FILE`, a docker save tarball"},
			&ucli.StringFlag{Name: "kind", Usage: "load the image into every node of the kind cluster `NAME` (see kind up)"},
			&ucli.StringFlag{Name: "package", Usage: "build the main package in `DIR` (default: the package this program was built from)"},
			&ucli.StringFlag{Name: "config", Usage: "read defaults from `FILE` (default: " + compile.ConfigFile + " in the working directory, if present)"},
		},
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			return imageBuild(c, flow)
		},
	}
}

func imageBuild(c *ucli.Context, flow *sdk.Flow) error {
	outputs := 0
	for _, set := range []bool{c.Bool("push"), c.IsSet("tarball"), c.IsSet("kind")} {
		if set {
			outputs++
		}
	}
	if outputs != 1 {
		return usageErr("say where the image goes, with one of --push (to --tag REF), --tarball FILE or --kind NAME")
	}
	if c.IsSet("tarball") && c.String("tarball") == "" {
		return usageErr("--tarball \"\": give the file to write")
	}
	platforms, err := image.ParsePlatforms(c.StringSlice("platform")...)
	if err != nil {
		return usageErr("--platform: %v", err)
	}
	if len(platforms) > 1 && !c.Bool("push") {
		return usageErr("--platform: a tarball or a kind cluster takes one platform: give one, or push the index with --push")
	}
	req := buildRequest{
		Base: c.String("base"), BaseSet: c.IsSet("base"), Tag: c.String("tag"), Platforms: platforms,
		Push: c.Bool("push"), Tarball: c.String("tarball"), Kind: c.String("kind"), Package: c.String("package"),
	}
	if c.IsSet("kind") && req.Kind == "" {
		req.Kind = kind.DefaultName
	}
	_, err = buildImage(c, flow, req)
	return err
}

// buildRequest says what image to build and where it goes: pushed (Push, to
// Tag), written to Tarball, or loaded into the kind cluster Kind.
type buildRequest struct {
	Base      string
	BaseSet   bool // Base came from the command line
	Tag       string
	Platforms []v1.Platform
	Push      bool
	Tarball   string
	Kind      string
	Package   string
}

// buildImage builds the flow program's image as req says, records it in
// built.File and returns the record. c gives the flow's config flags,
// the context and the writers.
func buildImage(c *ucli.Context, flow *sdk.Flow, req buildRequest) (*built.Record, error) {
	created, err := sourceDateEpoch()
	if err != nil {
		return nil, usageErr("%v", err)
	}
	opts, err := options(c, flow)
	if err != nil {
		return nil, err
	}
	cfg := opts.Config
	flowName := flowName(flow)

	entrypoint := cfg.Entrypoint
	if entrypoint == "" {
		entrypoint = compile.DefaultEntrypoint(flowName)
	}
	if err := image.CheckEntrypoint(entrypoint); err != nil {
		return nil, invalidErr(err)
	}

	keychain := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	base, err := imageBase(req, cfg, keychain)
	if err != nil {
		return nil, err
	}
	tag, tagFrom, err := imageTag(req.Tag, flow, cfg)
	if err != nil {
		return nil, err
	}
	publisher, err := imagePublisher(c, req, flowName, tag, keychain)
	if err != nil {
		return nil, err
	}

	pkg, err := flowPackage(req.Package)
	if err != nil {
		return nil, err
	}
	platforms := req.Platforms
	if len(platforms) == 0 {
		platforms = []v1.Platform{image.DefaultPlatform}
	}
	b := &image.Builder{
		Base:       base,
		Entrypoint: entrypoint,
		Platforms:  platforms,
		Time:       created,
	}
	res, err := buildProgram(c, flowName, pkg, b)
	if err != nil {
		return nil, err
	}
	if tagFrom != "" && req.Push {
		fmt.Fprintf(c.App.Writer, "pushing to %s (%s; --tag to change)\n", tag, tagFrom)
	}
	pub, err := publisher.Publish(c.Context, res)
	if err != nil {
		return nil, invalidErr(err)
	}
	record := built.Record{
		Flow:       flowName,
		Reference:  pub.Reference,
		Digest:     res.Digest.String(),
		Tags:       pub.Tags,
		Platforms:  res.PlatformNames(),
		Base:       base.String(),
		Entrypoint: entrypoint,
		Output:     pub.Output,
		Built:      time.Now().UTC().Truncate(time.Second),
	}
	if err := built.Write(built.File, record); err != nil {
		return nil, invalidErr(fmt.Errorf("recording the image: %w", err))
	}
	reportImage(c, req, pub)
	return &record, nil
}

// imageBase returns the base image: --base, else the config's base_image, else
// image.DefaultBase. A base that cannot be had is a usage error when it came
// from the command line.
func imageBase(req buildRequest, cfg compile.Config, keychain remote.Option) (image.Base, error) {
	baseName, baseFrom := req.Base, "--base"
	if baseName == "" {
		baseName, baseFrom = cfg.BaseImage, "base_image in "+compile.ConfigFile
	}
	if baseName == "" {
		baseName = image.DefaultBase
	}
	base, err := image.NewBase(baseName, keychain)
	if err != nil {
		if req.BaseSet {
			return base, usageErr("%v", err)
		}
		return base, invalidErr(fmt.Errorf("%s: %w", baseFrom, err))
	}
	return base, nil
}

// imagePublisher returns where the image goes, as req says: pushed to tag, or
// written to a tarball or loaded into a kind cluster under tag's repository
// (else one no registry answers to, named after the flow).
func imagePublisher(c *ucli.Context, req buildRequest, flowName string, tag *name.Tag, keychain remote.Option) (image.Publisher, error) {
	if req.Push {
		if tag == nil {
			return nil, usageErr("--push needs the image's name: give --tag REGISTRY/REPOSITORY[:TAG], or set sdk.Image on the flow or image in %s", compile.ConfigFile)
		}
		return image.Registry{Tag: *tag, Options: []remote.Option{keychain}}, nil
	}
	repo, err := name.NewRepository(localRepository + flowName)
	if err != nil {
		return nil, invalidErr(err)
	}
	if tag != nil {
		repo = tag.Context()
	}
	if req.Tarball != "" {
		return image.Tarball{Path: req.Tarball, Repository: repo, Tag: tag}, nil
	}
	cluster := cmp.Or(req.Kind, kind.DefaultName)
	if err := kind.CheckName(cluster); err != nil {
		return nil, usageErr("--kind: %v", err)
	}
	return image.Kind{Cluster: cluster, Repository: repo, Tag: tag, Load: func(ctx context.Context, archive string) error {
		return kind.Load(ctx, kind.LoadOptions{Name: cluster, Image: archive, Log: c.App.ErrWriter})
	}}, nil
}

// buildProgram builds the flow program from the main package pkg and then the
// image b describes, filling in b's compiler, cache and progress. It says what
// it builds on standard output and how compiling goes on standard error.
func buildProgram(c *ucli.Context, flowName, pkg string, b *image.Builder) (*image.Result, error) {
	w := c.App.Writer
	// Programs and layers are kept between builds, so that building an unchanged
	// program again takes a second; without a cache directory every build starts
	// afresh.
	cache, err := image.DefaultCacheDir()
	if err != nil {
		cache = ""
	}
	gb := &image.GoBuild{Package: pkg, CacheDir: cache}
	importPath, _, err := gb.Check(c.Context)
	if err != nil {
		return nil, invalidErr(err)
	}
	fmt.Fprintf(w, "building %s (%s) for %s on %s\n", flowName, importPath, strings.Join(platformNames(b.Platforms), ", "), b.Base)
	// Compiling takes minutes the first time: say so, and how it goes, on
	// standard error.
	_, _, live := terminal(c.App.ErrWriter)
	progressed := &compileProgress{w: c.App.ErrWriter, program: flowName, live: live, now: time.Now}
	gb.Progress = progressed.update
	b.Compiler = progressCompiler{gb, progressed}
	b.Progress = func(line string) { fmt.Fprintln(w, line) }
	b.CacheDir = cache
	res, err := b.Build(c.Context)
	if err != nil {
		return nil, invalidErr(err)
	}
	return res, nil
}

// reportImage says where the published image went and prints its reference
// last.
func reportImage(c *ucli.Context, req buildRequest, pub image.Published) {
	w := c.App.Writer
	switch {
	case req.Push:
		fmt.Fprintf(w, "pushed %s\n", strings.Join(pub.Tags, ", "))
	case req.Tarball != "":
		file := req.Tarball
		fmt.Fprintf(w, "wrote %s, tagged %s (load it with `%s kind load %s` or `docker load -i %s`)\n", file, strings.Join(pub.Tags, ", "), c.App.Name, file, file)
	default:
		fmt.Fprintf(w, "loaded into kind cluster %s, tagged %s\n", strings.TrimPrefix(pub.Output, "kind:"), strings.Join(pub.Tags, ", "))
	}
	fmt.Fprintf(w, "recorded in %s: compile --image-from-build puts it in every Run step\n", built.File)
	fmt.Fprintln(w, pub.Reference)
}

// imageTag returns the image's tag: ref (--tag), else the flow's own image, else the
// config's image; and, when not --tag, where it came from.
func imageTag(ref string, flow *sdk.Flow, cfg compile.Config) (*name.Tag, string, error) {
	from := ""
	if ref == "" {
		if img := flow.Spec().Defaults.Image; img != nil && *img != "" {
			ref, from = *img, "the flow's sdk.Image"
		} else if cfg.Image != "" {
			ref, from = cfg.Image, "image in "+compile.ConfigFile
		}
	}
	if ref == "" {
		return nil, "", nil
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		what := "--tag"
		if from != "" {
			what = from
		}
		return nil, "", usageErr("%s %q is not an image tag (%v): write REGISTRY/REPOSITORY[:TAG], such as registry.example.com/ml/%s:v1", what, ref, err, flowName(flow))
	}
	return &tag, from, nil
}

// flowPackage returns the flow's main package: dir when given (as an absolute
// path when it is a directory), else the import path this program was built
// from, which the go command then finds from the working directory's module.
func flowPackage(dir string) (string, error) {
	if dir != "" {
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			return filepath.Abs(dir)
		}
		return dir, nil
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Path == "" || bi.Path == "command-line-arguments" || strings.HasSuffix(bi.Path, ".test") {
		path := "unknown"
		if ok && bi.Path != "" {
			path = bi.Path
		}
		return "", usageErr("cannot tell the flow's main package from this program's build info (%s): pass its directory with --package DIR", path)
	}
	return bi.Path, nil
}

// sourceDateEpoch returns the time in SOURCE_DATE_EPOCH (seconds since the
// epoch), the reproducible-builds convention, or the zero time (meaning the
// epoch itself) when it is unset.
func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: give whole seconds since 1970, or unset it", v)
	}
	return time.Unix(n, 0).UTC(), nil
}

func platformNames(ps []v1.Platform) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
