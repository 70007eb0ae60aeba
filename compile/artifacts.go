package compile

import (
	"net/url"
	"regexp"
	"strings"
	"sync"
	"unicode"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// Schemes of an artifact store.
const (
	schemeS3  = "s3://"
	schemePVC = "pvc://"
)

// artifactStoreChoice says what an artifact store may be.
const artifactStoreChoice = "use s3://bucket/prefix, or pvc://CLAIM for a ReadWriteMany PersistentVolumeClaim"

// artifacts resolves the flow's artifact store: --artifacts, else
// sdk.ArtifactVolume, else manifold.toml's artifacts; and the S3 endpoint:
// --artifacts-endpoint, else artifacts_endpoint. Nil when there is no store.
func artifacts(spec sdk.FlowSpec, o Options) (*plan.Artifacts, field.ErrorList) {
	// Layers, highest first: the flags, the flow's code, manifold.toml.
	const (
		flags = iota
		code
		config
		none
	)
	var (
		store string
		at    *field.Path
		// value is what the user wrote, for errors.
		value string
		layer = none
	)
	switch {
	case o.Artifacts != "":
		store, at, value, layer = o.Artifacts, field.NewPath("artifacts"), o.Artifacts, flags
	case spec.ArtifactVolume != nil:
		store, at, value, layer = schemePVC+*spec.ArtifactVolume, field.NewPath("flow", "artifactVolume"), *spec.ArtifactVolume, code
	case o.Config.Artifacts != "":
		store, at, value, layer = o.Config.Artifacts, field.NewPath("config", "artifacts"), o.Config.Artifacts, config
	}
	endpoint, endpointAt, endpointLayer := o.ArtifactsEndpoint, field.NewPath("artifactsEndpoint"), flags
	if endpoint == "" {
		endpoint, endpointAt, endpointLayer = o.Config.ArtifactsEndpoint, field.NewPath("config", "artifacts_endpoint"), config
	}

	// The store's errors, then the endpoint's.
	a, errs := store2plan(store, at, value)
	switch {
	case endpoint == "" || strings.HasPrefix(store, schemeS3):
		if endpoint != "" {
			errs = append(errs, checkEndpoint(endpointAt, endpoint)...)
		}
	case endpointLayer > layer:
		// manifold.toml's endpoint went with its S3 store, which a volume in
		// the flow's code replaces.
		endpoint = ""
	default:
		errs = append(errs, field.Forbidden(endpointAt, "an endpoint is for an s3:// artifact store on an S3-compatible server; set the store to s3://bucket/prefix, or leave out the endpoint"))
	}
	if len(errs) > 0 || a == nil {
		return nil, errs
	}
	if a.Claim == "" {
		a.Endpoint = endpoint
	}
	return a, nil
}

// store2plan checks the store written at at (value is how it was written) and
// returns it for the plan; nil for none.
func store2plan(store string, at *field.Path, value string) (*plan.Artifacts, field.ErrorList) {
	switch {
	case store == "":
		return nil, nil
	case strings.HasPrefix(store, schemeS3):
		u, errs := s3Store(at, store)
		if len(errs) > 0 {
			return nil, errs
		}
		return &plan.Artifacts{URL: u}, nil
	case strings.HasPrefix(store, schemePVC):
		claim := strings.TrimPrefix(store, schemePVC)
		if claim == "" {
			return nil, field.ErrorList{field.Invalid(at, value, "name the PersistentVolumeClaim: sdk.ArtifactVolume(\"artifacts\"), or pvc://artifacts")}
		}
		var errs field.ErrorList
		for _, msg := range content.IsDNS1123Subdomain(claim) {
			errs = append(errs, field.Invalid(at, value, "a PersistentVolumeClaim name: "+msg))
		}
		if len(errs) > 0 {
			return nil, errs
		}
		return &plan.Artifacts{URL: plan.ArtifactVolumePath, Claim: claim}, nil
	}
	return nil, field.ErrorList{field.Invalid(at, value, artifactStoreChoice)}
}

// bucketName is what S3 allows in a general-purpose bucket's name.
var bucketName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)
})

// s3Store checks s3://bucket/prefix and returns it without a trailing '/'.
func s3Store(at *field.Path, store string) (string, field.ErrorList) {
	bucket, prefix, _ := strings.Cut(strings.TrimPrefix(store, schemeS3), "/")
	prefix = strings.TrimSuffix(prefix, "/")
	if !bucketName().MatchString(bucket) || strings.Contains(bucket, "..") {
		return "", field.ErrorList{field.Invalid(at, store, "use s3://bucket/prefix, where the bucket's name is 3 to 63 lowercase letters, digits, '.' and '-'")}
	}
	if prefix != "" {
		for _, elem := range strings.Split(prefix, "/") {
			if elem == "" || elem == "." || elem == ".." {
				return "", field.ErrorList{field.Invalid(at, store, "the prefix after the bucket is a path: no empty, . or .. elements")}
			}
		}
		if strings.IndexFunc(prefix, badStoreRune) >= 0 {
			// Kubernetes expands $(...) in variables, Argo {{...}} and Airflow
			// {{ ... }}: the prefix must reach every pod as written.
			return "", field.ErrorList{field.Invalid(at, store, "the prefix may not hold spaces, control characters, '\\', '$', '{' or '}'")}
		}
	}
	if prefix == "" {
		return schemeS3 + bucket, nil
	}
	return schemeS3 + bucket + "/" + prefix, nil
}

func badStoreRune(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\\' || r == '$' || r == '{' || r == '}' || r == unicode.ReplacementChar
}

// checkEndpoint refuses an endpoint that is not an http or https URL of a host.
func checkEndpoint(at *field.Path, endpoint string) field.ErrorList {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || strings.IndexFunc(endpoint, badStoreRune) >= 0 {
		return field.ErrorList{field.Invalid(at, endpoint, "write the S3-compatible server's URL, such as http://minio.storage:9000")}
	}
	return nil
}
