package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/yaml"
)

// customResource is one served version of a CustomResourceDefinition: what the API
// server's custom resource handler builds from it to default, prune and validate.
type customResource struct {
	resource   string
	structural *structuralschema.Structural
	strategy   rest.RESTCreateStrategy
}

// customResources holds the versions of every CRD given with --crd.
var customResources = map[schema.GroupVersionKind]customResource{}

// loadCRDs reads CustomResourceDefinitions from a YAML file (one or more documents).
func loadCRDs(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(data), "\n---") {
		if strings.TrimSpace(string(stripComments([]byte(doc)))) == "" {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal([]byte(doc), &crd); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := addCRD(&crd); err != nil {
			return fmt.Errorf("%s: CRD %s: %w", path, crd.Name, err)
		}
	}
	return nil
}

func addCRD(crd *apiextensionsv1.CustomResourceDefinition) error {
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		val, err := apihelpers.GetSchemaForVersion(crd, v.Name)
		if err != nil || val == nil {
			return fmt.Errorf("version %s has no schema", v.Name)
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return err
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return err
		}
		structural = structural.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(structural); err != nil {
			return err
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return err
		}
		var status *apiextensionsinternal.CustomResourceSubresourceStatus
		if v.Subresources != nil && v.Subresources.Status != nil {
			status = &apiextensionsinternal.CustomResourceSubresourceStatus{}
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
		customResources[gvk] = customResource{
			resource:   crd.Spec.Names.Plural,
			structural: structural,
			strategy: customresource.NewStrategy(unstructuredscheme.NewUnstructuredObjectTyper(),
				crd.Spec.Scope == apiextensionsv1.NamespaceScoped, gvk, validator, nil, structural, status, nil, v.SelectableFields),
		}
	}
	return nil
}

// admit is a webhook called after schema defaulting: it may patch the object (JSON)
// and returns the problems it reports.
type admit func(raw []byte) ([]byte, []string)

// validateCustomResource runs one document through the API server's custom resource
// create path: unknown fields are errors (as with kubectl's --validate=strict), then
// schema defaults, the mutating webhook, the OpenAPI schema and its CEL rules, and
// the validating webhook.
func validateCustomResource(doc []byte, gvk schema.GroupVersionKind, cr customResource, mutate, check admit) []string {
	data, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return []string{"decode: " + err.Error()}
	}
	var obj map[string]any
	if err := json.Unmarshal(data, &obj); err != nil {
		return []string{"decode: " + err.Error()}
	}
	u := &unstructured.Unstructured{Object: obj}
	what := fmt.Sprintf("%s %s", gvk.Kind, u.GetName())
	var problems []string
	opts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	for _, p := range pruning.PruneWithOptions(obj, cr.structural, true, opts) {
		problems = append(problems, fmt.Sprintf("%s: unknown field %q", what, p))
	}
	structuraldefaulting.Default(obj, cr.structural)

	if mutate != nil {
		raw, err := json.Marshal(obj)
		if err != nil {
			return append(problems, what+": "+err.Error())
		}
		raw, more := mutate(raw)
		problems = append(problems, more...)
		obj = map[string]any{}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return append(problems, what+": "+err.Error())
		}
		u = &unstructured.Unstructured{Object: obj}
	}

	problems = append(problems, create(what, gvk, cr.resource, cr.strategy, u, u)...)
	if check != nil {
		raw, err := json.Marshal(u.Object)
		if err != nil {
			return append(problems, what+": "+err.Error())
		}
		_, more := check(raw)
		problems = append(problems, more...)
	}
	return problems
}
