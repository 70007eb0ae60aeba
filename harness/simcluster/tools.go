package simcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Versions of the programs the simulated cluster runs. The tools modules under
// tools/ pin the same versions; TestToolsModulesMatchVersions checks they agree.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
	KwokVersion       = "v0.8.0"
	JobSetVersion     = "v0.12.0"
	ArgoVersion       = "v3.7.18"
	KueueVersion      = "v0.17.0"
)

// VersionKey names the cache directory of one set of tool versions, so that a
// version change builds into a fresh directory and never reuses stale binaries.
const VersionKey = "k8s-" + KubernetesVersion + "_etcd-" + EtcdVersion + "_kwok-" + KwokVersion +
	"_jobset-" + JobSetVersion + "_argo-" + ArgoVersion + "_kueue-" + KueueVersion

// CacheEnv overrides the cache directory that holds the built tools.
const CacheEnv = "MANIFOLD_SIMCLUSTER_BIN"

// Tool is one program of the simulated cluster, built from a Go package of a
// tools module.
type Tool struct {
	// Name is the binary's file name in the cache directory.
	Name string
	// Module is the tools module's directory, relative to tools/.
	Module string
	// Package is the Go package of the program's main.
	Package string
	// LDFlags set the version variables the program reports.
	LDFlags []string
	// Links are files a module's repository holds as symbolic links, which a
	// module's zip leaves out: in module Links.Module, file (the key) is built as
	// if it were the file it names (the value), from a copy of the module's source.
	Links *Links
}

// Links are symbolic links of a module's repository, file → target, both
// relative to the module's root.
type Links struct {
	Module string
	Files  map[string]string
}

func kubeLDFlags() []string {
	const pkg = "k8s.io/component-base/version"
	major, minor, _ := strings.Cut(strings.TrimPrefix(KubernetesVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	return []string{
		"-X", pkg + ".gitVersion=" + KubernetesVersion,
		"-X", pkg + ".gitMajor=" + major,
		"-X", pkg + ".gitMinor=" + minor,
		"-X", pkg + ".gitTreeState=clean",
	}
}

// Tools lists every program the simulated cluster needs.
func Tools() []Tool {
	return []Tool{
		{Name: "etcd", Module: "etcd", Package: "go.etcd.io/etcd/server/v3"},
		{Name: "kube-apiserver", Module: ".", Package: "k8s.io/kubernetes/cmd/kube-apiserver", LDFlags: kubeLDFlags()},
		{Name: "kube-scheduler", Module: ".", Package: "k8s.io/kubernetes/cmd/kube-scheduler", LDFlags: kubeLDFlags()},
		{Name: "kube-controller-manager", Module: ".", Package: "k8s.io/kubernetes/cmd/kube-controller-manager", LDFlags: kubeLDFlags()},
		{Name: "kubelet", Module: ".", Package: "k8s.io/kubernetes/cmd/kubelet", LDFlags: kubeLDFlags()},
		{Name: "kwok", Module: ".", Package: "sigs.k8s.io/kwok/cmd/kwok",
			LDFlags: []string{"-X", "sigs.k8s.io/kwok/pkg/consts.Version=" + strings.TrimPrefix(KwokVersion, "v"),
				"-X", "sigs.k8s.io/kwok/pkg/consts.KubeVersion=" + strings.TrimPrefix(KubernetesVersion, "v")}},
		{Name: "jobset-controller", Module: ".", Package: "sigs.k8s.io/jobset",
			LDFlags: []string{"-X", "sigs.k8s.io/jobset/pkg/version.GitVersion=" + JobSetVersion}},
		{Name: "workflow-controller", Module: "argo", Package: "github.com/argoproj/argo-workflows/v3/cmd/workflow-controller",
			LDFlags: []string{"-X", "github.com/argoproj/argo-workflows/v3.version=" + ArgoVersion}},
		// Argo's executor, which the real nodes run from an image the harness makes
		// of it (Cluster.PushArgoExec).
		{Name: "argoexec", Module: "argo", Package: "github.com/argoproj/argo-workflows/v3/cmd/argoexec",
			LDFlags: []string{"-X", "github.com/argoproj/argo-workflows/v3.version=" + ArgoVersion},
			// Linux's signal handling is a link to Darwin's in Argo's repository.
			Links: &Links{Module: "github.com/argoproj/argo-workflows/v3", Files: map[string]string{
				"workflow/executor/osspecific/signal_linux.go": "workflow/executor/osspecific/signal_darwin.go",
			}}},
		{Name: "kueue", Module: "kueue", Package: "sigs.k8s.io/kueue/cmd/kueue",
			LDFlags: []string{"-X", "sigs.k8s.io/kueue/pkg/version.GitVersion=" + KueueVersion}},
	}
}

// BinDir returns the directory holding the built tools: $MANIFOLD_SIMCLUSTER_BIN
// if set, else $HOME/.cache/manifold/simcluster/<VersionKey> (under the user
// cache directory).
func BinDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for the simulated cluster's tools (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(base, "manifold", "simcluster", VersionKey), nil
}

// MissingTools returns the tools not yet built in dir.
func MissingTools(dir string) []Tool {
	var missing []Tool
	for _, t := range Tools() {
		if fi, err := os.Stat(filepath.Join(dir, t.Name)); err != nil || !fi.Mode().IsRegular() {
			missing = append(missing, t)
		}
	}
	return missing
}

// BuildTools builds every tool missing from dir with the Go toolchain `goCmd`,
// from the tools modules in toolsDir (tools/simcluster). Each
// binary is written under a temporary name and renamed into place, so an
// interrupted build never leaves a partial binary behind. Progress goes to log.
func BuildTools(ctx context.Context, goCmd, toolsDir, dir string, log io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, t := range MissingTools(dir) {
		fmt.Fprintf(log, "building %s (%s)\n", t.Name, t.Package)
		tmp := filepath.Join(dir, "."+t.Name+".tmp")
		// -s -w leaves out the symbol table and the debugging information,
		// which nothing here reads (stack traces keep their lines): the link of
		// each program takes a third of the time (kube-scheduler's, 22.5 s
		// against 7.2 s, on 2 cores) and writes a third less.
		args := []string{"build", "-trimpath", "-o", tmp, "-ldflags=" + strings.Join(append([]string{"-s", "-w"}, t.LDFlags...), " ")}
		env := append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
		if t.Links != nil {
			modfile, err := withLinks(ctx, goCmd, filepath.Join(toolsDir, t.Module), env, dir, t)
			if err != nil {
				return err
			}
			defer os.RemoveAll(filepath.Dir(modfile))
			args = append(args, "-modfile="+modfile)
		}
		args = append(args, t.Package)
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = filepath.Join(toolsDir, t.Module)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("build %s in %s: %w", t.Package, cmd.Dir, err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, t.Name)); err != nil {
			return err
		}
	}
	return copyAssets(ctx, goCmd, toolsDir, dir, log)
}

// withLinks readies the build of t in moduleDir when t.Links names links: a
// copy of the linked module's source (from the module cache) under dir, with the
// links made, and a go.mod beside the tools module's that replaces the module
// with the copy. It returns go build's -modfile argument.
func withLinks(ctx context.Context, goCmd, moduleDir string, env []string, dir string, t Tool) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, "list", "-m", "-f", "{{.Dir}}", t.Links.Module)
	cmd.Dir, cmd.Env = moduleDir, env
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("the source of %s: %w", t.Links.Module, err)
	}
	src := filepath.Join(dir, ".src", t.Name)
	if err := os.RemoveAll(src); err != nil {
		return "", err
	}
	if err := os.CopyFS(src, os.DirFS(strings.TrimSpace(string(out)))); err != nil {
		return "", err
	}
	for file, target := range t.Links.Files {
		rel, err := filepath.Rel(filepath.Dir(file), target)
		if err != nil {
			return "", err
		}
		if err := os.Symlink(rel, filepath.Join(src, filepath.FromSlash(file))); err != nil {
			return "", err
		}
	}
	mod, err := os.ReadFile(filepath.Join(moduleDir, "go.mod"))
	if err != nil {
		return "", err
	}
	sum, err := os.ReadFile(filepath.Join(moduleDir, "go.sum"))
	if err != nil {
		return "", err
	}
	modfile := filepath.Join(dir, ".src", t.Name+".go.mod")
	mod = append(mod, []byte("\nreplace "+t.Links.Module+" => "+src+"\n")...)
	if err := os.WriteFile(modfile, mod, 0o644); err != nil {
		return "", err
	}
	return modfile, os.WriteFile(strings.TrimSuffix(modfile, ".mod")+".sum", sum, 0o644)
}

// asset is a directory of manifests taken from a tools module's source in the
// Go module cache, copied next to the binaries so a running cluster needs nothing
// but the cache directory.
type asset struct {
	// Dest is the directory under <cache>/assets.
	Dest string
	// Module is the tools module (relative to tools/) that requires Path.
	Module string
	// Path is the Go module holding the files, Dir the directory inside it.
	Path, Dir string
}

var assets = []asset{
	{Dest: "kwok-stages/node-fast", Module: ".", Path: "sigs.k8s.io/kwok", Dir: "kustomize/stage/node/fast"},
	{Dest: "kwok-stages/node-heartbeat", Module: ".", Path: "sigs.k8s.io/kwok", Dir: "kustomize/stage/node/heartbeat"},
	{Dest: "kwok-stages/pod-fast", Module: ".", Path: "sigs.k8s.io/kwok", Dir: "kustomize/stage/pod/fast"},
	{Dest: "jobset-crds", Module: ".", Path: "sigs.k8s.io/jobset", Dir: "config/components/crd/bases"},
	{Dest: "jobset-webhook", Module: ".", Path: "sigs.k8s.io/jobset", Dir: "config/components/webhook"},
	{Dest: "argo-crds", Module: "argo", Path: "github.com/argoproj/argo-workflows/v3", Dir: "manifests/base/crds/full"},
	{Dest: "argo-crds-minimal", Module: "argo", Path: "github.com/argoproj/argo-workflows/v3", Dir: "manifests/base/crds/minimal"},
	{Dest: "kueue-crds", Module: "kueue", Path: "sigs.k8s.io/kueue", Dir: "config/components/crd/bases"},
	{Dest: "kueue-webhook", Module: "kueue", Path: "sigs.k8s.io/kueue", Dir: "config/components/webhook"},
}

// assetsDone marks a complete copy of every asset.
const assetsDone = "assets/.complete"

// assetsComplete reports whether dir holds a complete copy of every asset (one
// made before an asset was added lacks its directory).
func assetsComplete(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, assetsDone)); err != nil {
		return false
	}
	for _, a := range assets {
		if _, err := os.Stat(filepath.Join(dir, "assets", a.Dest)); err != nil {
			return false
		}
	}
	return true
}

func copyAssets(ctx context.Context, goCmd, toolsDir, dir string, log io.Writer) error {
	if assetsComplete(dir) {
		return nil
	}
	fmt.Fprintln(log, "copying CRDs, webhook manifests and kwok stages")
	tmp := filepath.Join(dir, ".assets.tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	for _, a := range assets {
		cmd := exec.CommandContext(ctx, goCmd, "list", "-m", "-f", "{{.Dir}}", a.Path)
		cmd.Dir = filepath.Join(toolsDir, a.Module)
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
		cmd.Stderr = log
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("locate module %s: %w", a.Path, err)
		}
		src := filepath.Join(strings.TrimSpace(string(out)), a.Dir)
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		dst := filepath.Join(tmp, a.Dest)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") || e.Name() == "kustomization.yaml" || e.Name() == "kustomizeconfig.yaml" {
				continue
			}
			data, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), nil, 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(dir, "assets")); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "assets"))
}

// Ready reports whether dir holds every tool and asset, and if not, an error
// that says how to build them.
func Ready(dir string) error {
	var missing []string
	for _, t := range MissingTools(dir) {
		missing = append(missing, t.Name)
	}
	if !assetsComplete(dir) {
		missing = append(missing, "assets")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("the simulated cluster's tools are not built in %s (missing: %s): run `make sim-tools` from the repository root (about 30 minutes the first time, seconds later)",
		dir, strings.Join(missing, ", "))
}
