package simcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// Decode splits a YAML stream into its objects, skipping empty documents.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// Resource returns the client for obj's kind, in namespace ns for a namespaced
// kind (obj's own namespace if ns is "").
func (c *Cluster) Resource(obj *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	m, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		c.Mapper.Reset()
		m, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.Dynamic.Resource(m.Resource), nil
	}
	if ns == "" {
		ns = obj.GetNamespace()
	}
	if ns == "" {
		ns = "default"
	}
	return c.Dynamic.Resource(m.Resource).Namespace(ns), nil
}

// Create creates obj on the API server (in namespace ns, if obj's kind is
// namespaced and ns is set) and returns what the server stored: a real create,
// with the server's defaulting, validation and admission, and no client-side
// checks.
func (c *Cluster) Create(ctx context.Context, obj *unstructured.Unstructured, ns string) (*unstructured.Unstructured, error) {
	r, err := c.Resource(obj, ns)
	if err != nil {
		return nil, err
	}
	obj = obj.DeepCopy()
	if ns != "" && obj.GetNamespace() != "" {
		obj.SetNamespace(ns)
	}
	created, err := r.Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
	if err != nil {
		return nil, fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return created, nil
}

// gvr shortcuts for the kinds the harness itself manages.
var (
	crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)
