// Command kubevalidate checks Kubernetes manifests with the API server's own code,
// without a server: each YAML document is decoded strictly (unknown or duplicate
// fields are errors), defaulted, converted to the internal version, and put through
// the same create path a kube-apiserver v1.37.2 runs (the registry strategy's
// PrepareForCreate, Validate, declarative validation and WarningsOnCreate). A
// JobSet also goes through JobSet v0.12.0's own defaulting and validating webhooks,
// and each Job it would create through the Job checks. A warning is an error too:
// Manifold's output should draw none.
//
//	kubevalidate [--crd CRD.yaml]... FILE...
//
// A custom resource is checked against its CustomResourceDefinition, given with
// --crd, as the API server's custom resource handler does: unknown fields are
// errors, then schema defaults, the OpenAPI schema and its CEL rules.
// It prints one line per problem, prefixed with the file, document and object, and
// exits 1 if there is any. It lives in a module of its own so that the SDK's go.mod
// never depends on k8s.io/kubernetes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/warning"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/resource/install"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/resource/resourceclaimtemplate"
	"sigs.k8s.io/yaml"
)

// kinds are the kinds Manifold emits: their resource and create strategy.
var kinds = map[schema.GroupVersionKind]struct {
	resource string
	strategy rest.RESTCreateStrategy
}{
	{Group: "batch", Version: "v1", Kind: "Job"}:     {"jobs", job.Strategy},
	{Group: "batch", Version: "v1", Kind: "CronJob"}: {"cronjobs", cronjob.Strategy},
	{Group: "", Version: "v1", Kind: "Service"}:      {"services", service.Strategy},
	{Group: "", Version: "v1", Kind: "ConfigMap"}:    {"configmaps", configmap.Strategy},
	// Without a namespace client the strategy refuses admin access, which
	// Manifold never asks.
	{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplate"}: {"resourceclaimtemplates", resourceclaimtemplate.NewStrategy(nil)},
}

func main() {
	var files []string
	for args := os.Args[1:]; len(args) > 0; args = args[1:] {
		if args[0] != "--crd" {
			files = append(files, args[0])
			continue
		}
		if len(args) < 2 {
			usage()
		}
		if err := loadCRDs(args[1]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		args = args[1:]
	}
	if len(files) == 0 {
		usage()
	}
	problems := 0
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, p := range validateStream(data) {
			fmt.Printf("%s: %s\n", path, p)
			problems++
		}
	}
	if problems > 0 {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kubevalidate [--crd CRD.yaml]... FILE...")
	os.Exit(2)
}

// validateStream checks every document of a YAML stream and returns its problems.
func validateStream(data []byte) []string {
	var problems []string
	reader := utilyaml.NewYAMLReader(bufioReader(data))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return append(problems, fmt.Sprintf("document %d: %v", i, err))
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			i--
			continue
		}
		for _, p := range validate(doc) {
			problems = append(problems, fmt.Sprintf("document %d: %s", i, p))
		}
	}
	return problems
}

var codecs = serializer.NewCodecFactory(legacyscheme.Scheme, serializer.EnableStrict)

// validate runs one document through the API server's create path; a JobSet
// through JobSet's own webhooks.
func validate(doc []byte) []string {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err == nil {
		gvk := tm.GroupVersionKind()
		cr, ok := customResources[gvk]
		switch {
		case ok && gvk == jobSetKind:
			return validateJobSet(doc, cr)
		case ok:
			return validateCustomResource(doc, gvk, cr, nil, nil)
		case gvk.Group != "" && !legacyscheme.Scheme.IsGroupRegistered(gvk.Group):
			return []string{fmt.Sprintf("no validator for %s: give its CustomResourceDefinition with --crd", gvk)}
		}
	}
	obj, gvk, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
	if err != nil {
		return []string{"decode: " + err.Error()}
	}
	kind, ok := kinds[*gvk]
	if !ok {
		return []string{fmt.Sprintf("no validator for %s", gvk)}
	}
	legacyscheme.Scheme.Default(obj)
	internal, err := legacyscheme.Scheme.ConvertToVersion(obj, schema.GroupVersion{Group: gvk.Group, Version: runtime.APIVersionInternal})
	if err != nil {
		return []string{"convert: " + err.Error()}
	}
	accessor, err := meta.Accessor(internal)
	if err != nil {
		return []string{err.Error()}
	}
	what := fmt.Sprintf("%s %s", gvk.Kind, accessor.GetName())
	return create(what, *gvk, kind.resource, kind.strategy, internal, accessor)
}

// create runs obj through the API server's create path for resource in its
// namespace ("default" when it names none): the strategy's PrepareForCreate,
// Validate and WarningsOnCreate. It returns each problem, warnings included.
func create(what string, gvk schema.GroupVersionKind, resource string, strategy rest.RESTCreateStrategy, obj runtime.Object, accessor metav1.Object) []string {
	namespace := accessor.GetNamespace()
	if namespace == "" {
		namespace = "default"
		accessor.SetNamespace(namespace)
	}
	rest.FillObjectMetaSystemFields(accessor)
	warnings := &recorder{}
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create", APIGroup: gvk.Group, APIVersion: gvk.Version,
		Resource: resource, Namespace: namespace, Name: accessor.GetName(),
	})
	ctx = warning.WithWarningRecorder(ctx, warnings)
	problems := causes(what, rest.BeforeCreate(strategy, ctx, obj))
	for _, w := range warnings.texts {
		problems = append(problems, fmt.Sprintf("%s: warning: %s", what, w))
	}
	return problems
}

// causes lists the problems of a create error, one per cause.
func causes(what string, err error) []string {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil && len(status.Status().Details.Causes) > 0 {
		var problems []string
		for _, c := range status.Status().Details.Causes {
			problems = append(problems, fmt.Sprintf("%s: %s: %s", what, c.Field, c.Message))
		}
		return problems
	}
	return []string{fmt.Sprintf("%s: %v", what, err)}
}

type recorder struct{ texts []string }

func (r *recorder) AddWarning(_, text string) { r.texts = append(r.texts, text) }

func stripComments(doc []byte) []byte {
	var out []string
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

func bufioReader(data []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(data)) }
