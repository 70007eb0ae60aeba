package compile_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func TestArtifacts(t *testing.T) {
	volumeFlow := sdk.NewFlow("f", sdk.ArtifactVolume("shared")).Step("s", sdk.Image(img), sdk.Command("true"))
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		o    compile.Options
		want *plan.Artifacts
	}{
		{name: "none", flow: one()},
		{
			name: "s3 in manifold.toml",
			flow: one(),
			o:    compile.Options{Config: compile.Config{Artifacts: "s3://ml-artifacts/team/flows/"}},
			want: &plan.Artifacts{URL: "s3://ml-artifacts/team/flows"},
		},
		{
			name: "a bucket without prefix, on an S3-compatible server",
			flow: one(),
			o:    compile.Options{Config: compile.Config{Artifacts: "s3://ml-artifacts", ArtifactsEndpoint: "http://minio.storage:9000"}},
			want: &plan.Artifacts{URL: "s3://ml-artifacts", Endpoint: "http://minio.storage:9000"},
		},
		{
			name: "a volume in code",
			flow: volumeFlow,
			want: &plan.Artifacts{URL: plan.ArtifactVolumePath, Claim: "shared"},
		},
		{
			name: "a volume in manifold.toml",
			flow: one(),
			o:    compile.Options{Config: compile.Config{Artifacts: "pvc://team-artifacts"}},
			want: &plan.Artifacts{URL: "/manifold/artifacts", Claim: "team-artifacts"},
		},
		{
			name: "code wins over manifold.toml",
			flow: volumeFlow,
			o:    compile.Options{Config: compile.Config{Artifacts: "s3://ml-artifacts", ArtifactsEndpoint: "http://minio:9000"}},
			want: &plan.Artifacts{URL: plan.ArtifactVolumePath, Claim: "shared"},
		},
		{
			name: "flags win over code and manifold.toml",
			flow: volumeFlow,
			o: compile.Options{Artifacts: "s3://other/p", ArtifactsEndpoint: "https://s3.example.com",
				Config: compile.Config{Artifacts: "s3://ml-artifacts", ArtifactsEndpoint: "http://minio:9000"}},
			want: &plan.Artifacts{URL: "s3://other/p", Endpoint: "https://s3.example.com"},
		},
		{
			name: "the config's endpoint serves the flag's store",
			flow: one(),
			o:    compile.Options{Artifacts: "s3://other", Config: compile.Config{ArtifactsEndpoint: "http://minio:9000"}},
			want: &plan.Artifacts{URL: "s3://other", Endpoint: "http://minio:9000"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, errs := compile.Compile(tc.flow, tc.o)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if diff := cmp.Diff(tc.want, p.Artifacts); diff != "" {
				t.Errorf("artifacts (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArtifactsErrors(t *testing.T) {
	config := func(store, endpoint string) compile.Options {
		return compile.Options{Config: compile.Config{Artifacts: store, ArtifactsEndpoint: endpoint}}
	}
	configAt := field.NewPath("config", "artifacts")
	endpointAt := field.NewPath("config", "artifacts_endpoint")
	for _, tc := range []struct {
		name string
		flow *sdk.Flow
		o    compile.Options
		want field.ErrorList
	}{
		{"not a store", one(), config("ftp://x", ""), field.ErrorList{field.Invalid(configAt, "ftp://x", "")}},
		{"a path", one(), config("/data", ""), field.ErrorList{field.Invalid(configAt, "/data", "")}},
		{"no bucket", one(), config("s3://", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"an uppercase bucket", one(), config("s3://ML/x", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"a prefix Kubernetes would expand", one(), config("s3://ml/$(HOME)", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"a prefix Argo would expand", one(), config("s3://ml/{{workflow.name}}", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"a prefix with ..", one(), config("s3://ml/a/../b", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"a prefix with //", one(), config("s3://ml/a//b", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"a bad claim", one(), config("pvc://Shared_Data", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"no claim", one(), config("pvc://", ""), field.ErrorList{field.Invalid(configAt, "", "")}},
		{"a bad claim in code", sdk.NewFlow("f", sdk.ArtifactVolume("")).Step("s", sdk.Image(img), sdk.Command("true")), compile.Options{},
			field.ErrorList{field.Invalid(field.NewPath("flow", "artifactVolume"), "", "")}},
		{"a bad flag", one(), compile.Options{Artifacts: "gs://b"}, field.ErrorList{field.Invalid(field.NewPath("artifacts"), "", "")}},
		{"an endpoint without a store", one(), config("", "http://minio:9000"), field.ErrorList{field.Forbidden(endpointAt, "")}},
		{"an endpoint of a volume", one(), config("pvc://shared", "http://minio:9000"), field.ErrorList{field.Forbidden(endpointAt, "")}},
		{"a bad endpoint", one(), config("s3://ml-artifacts", "minio:9000"), field.ErrorList{field.Invalid(endpointAt, "", "")}},
		{"a bad endpoint flag", one(), compile.Options{Artifacts: "s3://ml-artifacts", ArtifactsEndpoint: "ftp://x"},
			field.ErrorList{field.Invalid(field.NewPath("artifactsEndpoint"), "", "")}},
		{"a step's volume where the artifact volume goes",
			sdk.NewFlow("f", sdk.ArtifactVolume("shared")).Step("s", sdk.Image(img), sdk.Command("true"), sdk.Volume("data", "/manifold/artifacts")),
			compile.Options{}, field.ErrorList{field.Forbidden(sAt("volumes").Index(0).Child("path"), "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := compile.Compile(tc.flow, tc.o)
			if diff := cmp.Diff(tc.want, errs, ignoreDetail); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArtifactsErrorMessage: the message says what to write instead.
func TestArtifactsErrorMessage(t *testing.T) {
	_, errs := compile.Compile(one(), compile.Options{Config: compile.Config{Artifacts: "ftp://x"}})
	want := `config.artifacts: Invalid value: "ftp://x": use s3://bucket/prefix, or pvc://CLAIM for a ReadWriteMany PersistentVolumeClaim`
	if len(errs) != 1 || errs[0].Error() != want {
		t.Errorf("errors %v, want %q", errs, want)
	}
	// Without a store, a step's volume may use the artifact volume's path.
	if _, errs := compile.Compile(one(sdk.Volume("data", "/manifold/artifacts")), compile.Options{}); len(errs) > 0 {
		t.Errorf("a volume at /manifold/artifacts without an artifact volume: %v", errs)
	}
	if s := sdk.ArtifactVolume("shared"); !strings.Contains(s.(interface{ String() string }).String(), `ArtifactVolume("shared")`) {
		t.Errorf("ArtifactVolume prints as %v", s)
	}
}
