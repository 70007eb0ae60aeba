// Command kindmanifests writes the install manifests that `kind up --with`
// applies (package provision/kind embeds them), built from the Go modules of
// the pinned releases with kustomize, as those releases build theirs:
//
//   - JobSet: the kustomization config/default of sigs.k8s.io/jobset (what a
//     JobSet release builds into manifests.yaml), with the controller image of
//     the release, registry.k8s.io/jobset/jobset:<version>.
//   - Argo Workflows: manifests/cluster-install of
//     github.com/argoproj/argo-workflows/v3 (what a release builds into
//     install.yaml), with the release's images instead of :latest, and the
//     namespace argo it installs into.
//
// The modules come from the Go module cache, or the module proxy: no release
// download. Run it with `go generate ./provision/kind`; -check compares the
// files with what it would write and fails if they differ.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The pinned releases; provision/kind names the same versions.
const (
	jobSetModule  = "sigs.k8s.io/jobset"
	jobSetVersion = "v0.12.0"
	argoModule    = "github.com/argoproj/argo-workflows/v3"
	argoVersion   = "v3.7.18"
)

// manifest is one generated file: a kustomization that refers to a directory of
// a module.
type manifest struct {
	file, module, version, header string
	// dir is the module's directory the overlay builds on, copied to src/<dir>.
	dir string
	// kustomization is the overlay's kustomization.yaml, beside src/.
	kustomization string
	// extra files of the overlay, by name.
	extra map[string]string
}

var manifests = []manifest{
	{
		file: "jobset-" + jobSetVersion + ".yaml", module: jobSetModule, version: jobSetVersion,
		header: `JobSet ` + jobSetVersion + ` for "kind up --with jobset": config/default of the Go module
# ` + jobSetModule + `@` + jobSetVersion + `, as a JobSet release builds it into manifests.yaml, with the
# release's controller image.`,
		dir: "config",
		kustomization: `resources:
- src/config/default
images:
- name: us-central1-docker.pkg.dev/k8s-staging-images/jobset/jobset
  newName: registry.k8s.io/jobset/jobset
  newTag: ` + jobSetVersion + `
`,
	},
	{
		file: "argo-" + argoVersion + ".yaml", module: argoModule, version: argoVersion,
		header: `Argo Workflows ` + argoVersion + ` for "kind up --with argo": manifests/cluster-install of the
# Go module ` + argoModule + `@` + argoVersion + `, as an Argo release builds it
# into install.yaml (images at ` + argoVersion + `, not :latest), and the namespace argo.`,
		dir: "manifests",
		kustomization: `resources:
- namespace.yaml
- src/manifests/cluster-install
images:
- name: quay.io/argoproj/workflow-controller
  newTag: ` + argoVersion + `
- name: quay.io/argoproj/argocli
  newTag: ` + argoVersion + `
`,
		extra: map[string]string{"namespace.yaml": "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: argo\n"},
	},
}

func main() {
	out := flag.String("o", "", "write the manifests into `DIR`")
	check := flag.Bool("check", false, "compare the files in -o with what would be written; exit 1 if they differ")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: kindmanifests -o DIR [-check]")
		os.Exit(2)
	}
	stale := false
	for _, m := range manifests {
		data, err := build(m)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kindmanifests: %s: %v\n", m.file, err)
			os.Exit(1)
		}
		path := filepath.Join(*out, m.file)
		if *check {
			have, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(have, data) {
				fmt.Fprintf(os.Stderr, "%s is not what tools/kindmanifests makes; run go generate ./provision/kind\n", path)
				stale = true
			}
			continue
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "kindmanifests:", err)
			os.Exit(1)
		}
	}
	if stale {
		os.Exit(1)
	}
}

// build runs kustomize over m's overlay and returns the file, header first.
func build(m manifest) ([]byte, error) {
	dir, err := moduleDir(m.module, m.version)
	if err != nil {
		return nil, err
	}
	overlay, err := os.MkdirTemp("", "kindmanifests-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(overlay)
	// kustomize refuses absolute paths to bases: build on a copy.
	if err := os.CopyFS(filepath.Join(overlay, "src", m.dir), os.DirFS(filepath.Join(dir, m.dir))); err != nil {
		return nil, err
	}
	files := map[string]string{"kustomization.yaml": m.kustomization}
	for name, text := range m.extra {
		files[name] = text
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(text), 0o644); err != nil {
			return nil, err
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return nil, err
	}
	yaml, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n# Generated by tools/kindmanifests (go generate ./provision/kind); DO NOT EDIT.\n", m.header)
	b.Write(yaml)
	return b.Bytes(), nil
}

// moduleDir returns the directory of module@version in the module cache,
// downloading it through the module proxy if it is not there.
func moduleDir(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %v: %s", module, version, err, strings.TrimSpace(stderr.String()))
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}
