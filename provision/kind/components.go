package kind

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/manifoldflow/manifold/internal/kubeclient"
)

// The pinned releases `kind up --with` installs. Their manifests are embedded
// from manifests/, which tools/kindmanifests generates from these releases' Go
// modules (see the go:generate line below).
const (
	JobSetVersion = "v0.12.0"
	ArgoVersion   = "v3.7.18"
)

//go:generate go -C ../../tools/kindmanifests run . -o ../../provision/kind/manifests

//go:embed manifests/*.yaml
var manifestFiles embed.FS

// Component is something Up installs when asked (--with).
type Component struct {
	// Name is what --with calls it: "jobset" or "argo".
	Name string
	// Title and Version name the release ("JobSet", "v0.12.0").
	Title, Version string
	// Source says where the manifest comes from.
	Source string
	file   string
}

// Components are what --with can install, in the order Up installs them.
var Components = []Component{
	{Name: "jobset", Title: "JobSet", Version: JobSetVersion, file: "manifests/jobset-" + JobSetVersion + ".yaml",
		Source: "config/default of the Go module sigs.k8s.io/jobset@" + JobSetVersion + ", as its release's manifests.yaml, controller image registry.k8s.io/jobset/jobset:" + JobSetVersion},
	{Name: "argo", Title: "Argo Workflows", Version: ArgoVersion, file: "manifests/argo-" + ArgoVersion + ".yaml",
		Source: "manifests/cluster-install of the Go module github.com/argoproj/argo-workflows/v3@" + ArgoVersion + ", as its release's install.yaml, in namespace argo"},
}

// ParseWith parses --with values, each one or more comma-separated component
// names, into components in install order, once each.
func ParseWith(values []string) ([]Component, error) {
	var want []string
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !slices.ContainsFunc(Components, func(c Component) bool { return c.Name == name }) {
				return nil, fmt.Errorf("--with %q: choose from %s (comma-separated)", name, componentNames())
			}
			want = append(want, name)
		}
	}
	var out []Component
	for _, c := range Components {
		if slices.Contains(want, c.Name) {
			out = append(out, c)
		}
	}
	return out, nil
}

func componentNames() string {
	names := make([]string, len(Components))
	for i, c := range Components {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

// Objects returns the objects of c's manifest, in the order to apply them:
// namespaces and CustomResourceDefinitions first, then the rest as the manifest
// lists them.
func (c Component) Objects() ([]*unstructured.Unstructured, error) {
	data, err := manifestFiles.ReadFile(c.file)
	if err != nil {
		return nil, err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", c.file, err)
		}
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	first := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return first(a) - first(b) })
	return objs, nil
}

// applyOptions apply a component's objects as kind's manifests are applied
// (kubectl apply --server-side), owned by Manifold, with strict validation.
func applyOptions(dryRun bool) metav1.PatchOptions {
	o := metav1.PatchOptions{FieldManager: "manifold-kind", Force: new(true), FieldValidation: "Strict"}
	if dryRun {
		o.DryRun = []string{metav1.DryRunAll}
	}
	return o
}

// apply applies objs by server-side apply (dry run only, if dryRun), finding
// each kind's resource through mapper.
func apply(ctx context.Context, dyn dynamic.Interface, mapper *kubeclient.Mapper, objs []*unstructured.Unstructured, dryRun bool) error {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			mapper.Reset() // a kind a CRD just added
			m, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			r = dyn.Resource(m.Resource).Namespace(o.GetNamespace())
		}
		body, err := json.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := r.Patch(ctx, o.GetName(), types.ApplyPatchType, body, applyOptions(dryRun)); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, qualified(o.GetNamespace(), o.GetName()), err)
		}
	}
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// install applies c's manifest and waits, at most timeout, until each of its
// Deployments is Available.
func install(ctx context.Context, c *kubeclient.Clientset, dyn dynamic.Interface, mapper *kubeclient.Mapper, comp Component, timeout time.Duration) error {
	objs, err := comp.Objects()
	if err != nil {
		return err
	}
	if err := apply(ctx, dyn, mapper, objs, false); err != nil {
		return fmt.Errorf("install %s %s: %w", comp.Title, comp.Version, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, o := range objs {
		if o.GetKind() != "Deployment" {
			continue
		}
		if err := waitAvailable(ctx, c, o.GetNamespace(), o.GetName()); err != nil {
			return fmt.Errorf("install %s %s: %w", comp.Title, comp.Version, err)
		}
	}
	return nil
}

// waitAvailable watches Deployment ns/name until it is Available, or ctx ends;
// the error then gives the Deployment's last condition and the kubectl
// command that shows why.
func waitAvailable(ctx context.Context, c *kubeclient.Clientset, ns, name string) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := kubeclient.ListWatch(c.AppsV1().Deployments(ns), func(o *metav1.ListOptions) { o.FieldSelector = sel })
	var last *appsv1.Deployment
	_, err := watchtools.UntilWithSync(ctx, lw, &appsv1.Deployment{}, nil, func(e watch.Event) (bool, error) {
		d, ok := e.Object.(*appsv1.Deployment)
		if !ok {
			return false, nil
		}
		last = d
		for _, cond := range d.Status.Conditions {
			if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue && d.Status.ObservedGeneration >= d.Generation {
				return true, nil
			}
		}
		return false, nil
	})
	if err == nil {
		return nil
	}
	why := "it was never seen"
	if last != nil {
		why = fmt.Sprintf("%d of %d replicas available", last.Status.AvailableReplicas, max(last.Status.Replicas, 1))
		if n := len(last.Status.Conditions); n > 0 {
			cond := last.Status.Conditions[n-1]
			why += fmt.Sprintf("; %s: %s", cond.Reason, cond.Message)
		}
	}
	return fmt.Errorf("deployment %s/%s is not available (%s); see kubectl -n %s describe deployment %s, and its pods' events (an image pull needs the network)",
		ns, name, why, ns, name)
}
