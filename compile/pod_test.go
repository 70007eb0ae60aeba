package compile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/image"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func TestPod(t *testing.T) {
	runAcceleratorCases(t, []acceleratorCase{
		{
			name: "env keeps declaration order; a later value replaces in place",
			opts: []sdk.StepOption{sdk.Env("X", "1"), sdk.Env("Y", "2"), sdk.Env("X", "3"), sdk.SecretEnv("TOKEN", "creds", "token")},
			want: with(func(s *plan.Step) {
				s.Env = []plan.EnvVar{
					{Name: "X", Value: "3"},
					{Name: "Y", Value: "2"},
					{Name: "TOKEN", SecretName: "creds", SecretKey: "token"},
				}
			}),
		},
		{
			name: "labels and annotations",
			opts: []sdk.StepOption{sdk.Label("team", "ml"), sdk.Label("cost-center", "42"), sdk.Annotation("example.com/note", "any value: at all")},
			want: with(func(s *plan.Step) {
				s.Labels = []plan.KeyValue{
					{Key: "app.kubernetes.io/name", Value: "f"},
					{Key: "app.kubernetes.io/part-of", Value: "manifold"},
					{Key: "cost-center", Value: "42"},
					{Key: "manifold.dev/flow", Value: "f"},
					{Key: "manifold.dev/step", Value: "s"},
					{Key: "team", Value: "ml"},
				}
				s.Annotations = []plan.KeyValue{{Key: "example.com/note", Value: "any value: at all"}}
			}),
		},
		{
			name: "image pull policy and secrets, service account, namespace",
			opts: []sdk.StepOption{sdk.ImagePullPolicy("IfNotPresent"), sdk.ImagePullSecret("ecr"), sdk.ImagePullSecret("ecr"),
				sdk.ImagePullSecret("ghcr"), sdk.ServiceAccount("trainer"), sdk.Namespace("ml"), sdk.Secret("creds")},
			want: with(func(s *plan.Step) {
				s.ImagePullPolicy = "IfNotPresent"
				s.ImagePullSecrets = []string{"ecr", "ghcr"}
				s.ServiceAccount = "trainer"
				s.Namespace = "ml"
				s.Secrets = []string{"creds"}
			}),
		},
		{
			name: "volumes and shared memory",
			opts: []sdk.StepOption{sdk.Volume("data", "/data"), sdk.Volume("ckpt", "/checkpoints"), sdk.SharedMemory("64Gi")},
			want: with(func(s *plan.Step) {
				s.Volumes = []plan.Volume{{Name: "pvc-0", Claim: "data", Path: "/data"}, {Name: "pvc-1", Claim: "ckpt", Path: "/checkpoints"}}
				s.SharedMemory = "64Gi"
			}),
		},
		{
			name: "the same claim at two paths",
			opts: []sdk.StepOption{sdk.Volume("data", "/a"), sdk.Volume("data", "/b")},
			want: with(func(s *plan.Step) {
				s.Volumes = []plan.Volume{{Name: "pvc-0", Claim: "data", Path: "/a"}, {Name: "pvc-1", Claim: "data", Path: "/b"}}
			}),
		},
		{
			name: "port and security",
			opts: []sdk.StepOption{sdk.Port(8080), sdk.RunAsNonRoot(true), sdk.RunAsUser(1000)},
			want: with(func(s *plan.Step) {
				s.Port = 8080
				s.RunAsNonRoot = ptr(true)
				s.RunAsUser = ptr(int64(1000))
			}),
		},
		{
			name: "root, said plainly",
			opts: []sdk.StepOption{sdk.RunAsNonRoot(false), sdk.RunAsUser(0)},
			want: with(func(s *plan.Step) {
				s.RunAsNonRoot = ptr(false)
				s.RunAsUser = ptr(int64(0))
			}),
		},
		{
			name: "retry, backoff and timeout",
			opts: []sdk.StepOption{sdk.Retry(2), sdk.RetryBackoff(30 * time.Second), sdk.Timeout(6 * time.Hour)},
			want: with(func(s *plan.Step) {
				s.Retry = 2
				s.RetryBackoff = 30 * time.Second
				s.Timeout = 6 * time.Hour
			}),
		},
		{
			name: "retry zero and the shortest timeout",
			opts: []sdk.StepOption{sdk.Retry(0), sdk.Timeout(time.Second)},
			want: with(func(s *plan.Step) { s.Timeout = time.Second }),
		},
		{
			name: "cpu is canonical and only requested",
			opts: []sdk.StepOption{sdk.CPU("0.5")},
			want: with(func(s *plan.Step) { s.Requests = q("cpu", "500m") }),
		},
		{
			name: "cpu in millicores that make whole cores",
			opts: []sdk.StepOption{sdk.CPU("2000m")},
			want: with(func(s *plan.Step) { s.Requests = q("cpu", "2") }),
		},
		{
			name: "memory is requested and limited",
			opts: []sdk.StepOption{sdk.Memory("16Gi")},
			want: with(func(s *plan.Step) {
				s.Requests = q("memory", "16Gi")
				s.Limits = q("memory", "16Gi")
			}),
		},
		{
			name: "disk is only requested",
			opts: []sdk.StepOption{sdk.Disk("100Gi"), sdk.CPU("4"), sdk.Memory("1024Mi")},
			want: with(func(s *plan.Step) {
				s.Requests = q("cpu", "4", "ephemeral-storage", "100Gi", "memory", "1Gi")
				s.Limits = q("memory", "1Gi")
			}),
		},
	})
}

func TestManifoldLabels(t *testing.T) {
	f := sdk.NewFlow("neuron-train", sdk.Image(img)).
		Step("prepare", sdk.Command("true")).
		Step("train", sdk.Command("true"), sdk.Label("team", "ml"))
	p := mustCompile(t, f, compile.Options{})
	for _, step := range []string{"prepare", "train"} {
		got := map[string]string{}
		for _, kv := range p.Step(step).Labels {
			got[kv.Key] = kv.Value
		}
		for k, v := range map[string]string{
			"app.kubernetes.io/name":    "neuron-train",
			"app.kubernetes.io/part-of": "manifold",
			"manifold.dev/flow":         "neuron-train",
			"manifold.dev/step":         step,
		} {
			if got[k] != v {
				t.Errorf("%s: label %s = %q, want %q", step, k, got[k], v)
			}
		}
	}
}

func TestEnvAcrossLayers(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Env("A", "flow"), sdk.Env("B", "flow")).
		Step("s", sdk.Command("true"), sdk.Env("C", "step"), sdk.Env("A", "step"))
	want := []plan.EnvVar{{Name: "A", Value: "step"}, {Name: "B", Value: "flow"}, {Name: "C", Value: "step"}}
	if diff := cmp.Diff(want, mustStep(t, f, compile.Options{}, "s").Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestPodErrors(t *testing.T) {
	env := func(name string) *field.Path { return sAt("env").Key(name) }
	label := func(key string) *field.Path { return sAt("labels").Key(key) }
	vol := func(i int, f string) *field.Path { return sAt("volumes").Index(i).Child(f) }
	runErrorCases(t, []errorCase{
		{name: "env MANIFOLD_", flow: one(sdk.Env("MANIFOLD_ITEM", "x")), want: field.ErrorList{field.Forbidden(env("MANIFOLD_ITEM"), "")}},
		{name: "env MANIFOLD_PARAM_", flow: one(sdk.Env("MANIFOLD_PARAM_EPOCHS", "3")), want: field.ErrorList{field.Forbidden(env("MANIFOLD_PARAM_EPOCHS"), "")}},
		{name: "secret env MANIFOLD_", flow: one(sdk.SecretEnv("MANIFOLD_TOKEN", "creds", "token")), want: field.ErrorList{field.Forbidden(env("MANIFOLD_TOKEN"), "")}},
		{name: "env name with =", flow: one(sdk.Env("A=B", "x")), want: field.ErrorList{field.Invalid(env("A=B"), nil, "")}},
		{name: "env empty name", flow: one(sdk.Env("", "x")), want: field.ErrorList{field.Invalid(env(""), nil, "")}},
		{name: "secret env bad secret", flow: one(sdk.SecretEnv("T", "Bad_Secret", "k")), want: field.ErrorList{field.Invalid(env("T").Child("secret"), nil, "")}},
		{name: "secret env bad key", flow: one(sdk.SecretEnv("T", "creds", "a/b")), want: field.ErrorList{field.Invalid(env("T").Child("key"), nil, "")}},
		{name: "label manifold.dev/", flow: one(sdk.Label("manifold.dev/run", "x")), want: field.ErrorList{field.Forbidden(label("manifold.dev/run"), "")}},
		{name: "label manifold.dev/step", flow: one(sdk.Label("manifold.dev/step", "other")), want: field.ErrorList{field.Forbidden(label("manifold.dev/step"), "")}},
		{name: "label part-of", flow: one(sdk.Label("app.kubernetes.io/part-of", "other")), want: field.ErrorList{field.Forbidden(label("app.kubernetes.io/part-of"), "")}},
		{name: "label name", flow: one(sdk.Label("app.kubernetes.io/name", "other")), want: field.ErrorList{field.Forbidden(label("app.kubernetes.io/name"), "")}},
		{name: "label value with a space", flow: one(sdk.Label("team", "machine learning")), want: field.ErrorList{field.Invalid(label("team"), nil, "")}},
		{name: "label value too long", flow: one(sdk.Label("team", strings.Repeat("a", 64))), want: field.ErrorList{field.Invalid(label("team"), nil, "")}},
		{name: "label key", flow: one(sdk.Label("bad key", "v")), want: field.ErrorList{field.Invalid(label("bad key"), nil, "")}},
		{name: "annotation manifold.dev/", flow: one(sdk.Annotation("manifold.dev/after", "x")), want: field.ErrorList{field.Forbidden(sAt("annotations").Key("manifold.dev/after"), "")}},
		{name: "annotation key", flow: one(sdk.Annotation("bad key", "v")), want: field.ErrorList{field.Invalid(sAt("annotations").Key("bad key"), nil, "")}},
		{name: "pull policy", flow: one(sdk.ImagePullPolicy("Sometimes")), want: field.ErrorList{field.NotSupported[string](sAt("imagePullPolicy"), nil, nil)}},
		{name: "pull policy lower case", flow: one(sdk.ImagePullPolicy("always")), want: field.ErrorList{field.NotSupported[string](sAt("imagePullPolicy"), nil, nil)}},
		{name: "pull secret name", flow: one(sdk.ImagePullSecret("Bad_Name")), want: field.ErrorList{field.Invalid(sAt("imagePullSecrets").Index(0), nil, "")}},
		{name: "secret name", flow: one(sdk.Secret("Bad_Name")), want: field.ErrorList{field.Invalid(sAt("secrets").Index(0), nil, "")}},
		{name: "service account", flow: one(sdk.ServiceAccount("Bad_Name")), want: field.ErrorList{field.Invalid(sAt("serviceAccount"), nil, "")}},
		{name: "namespace", flow: one(sdk.Namespace("ML")), want: field.ErrorList{field.Invalid(sAt("namespace"), nil, "")}},
		{name: "volume relative path", flow: one(sdk.Volume("data", "data")), want: field.ErrorList{field.Invalid(vol(0, "path"), nil, "")}},
		{name: "volume unclean path", flow: one(sdk.Volume("data", "/data/../etc")), want: field.ErrorList{field.Invalid(vol(0, "path"), nil, "")}},
		{name: "volume path with colon", flow: one(sdk.Volume("data", "/data:ro")), want: field.ErrorList{field.Invalid(vol(0, "path"), nil, "")}},
		{name: "volume claim", flow: one(sdk.Volume("Bad_Claim", "/data")), want: field.ErrorList{field.Invalid(vol(0, "claim"), nil, "")}},
		{name: "shared memory and a volume at /dev/shm", flow: one(sdk.SharedMemory("1Gi"), sdk.Volume("shm", "/dev/shm")), want: field.ErrorList{field.Forbidden(vol(0, "path"), "")}},
		{name: "port zero", flow: one(sdk.Port(0)), want: field.ErrorList{field.Invalid(sAt("port"), nil, "")}},
		{name: "port too high", flow: one(sdk.Port(70000)), want: field.ErrorList{field.Invalid(sAt("port"), nil, "")}},
		{name: "port negative", flow: one(sdk.Port(-1)), want: field.ErrorList{field.Invalid(sAt("port"), nil, "")}},
		{name: "non-root as root", flow: one(sdk.RunAsNonRoot(true), sdk.RunAsUser(0)), want: field.ErrorList{field.Forbidden(sAt("runAsNonRoot"), "")}},
		{name: "negative user", flow: one(sdk.RunAsUser(-1)), want: field.ErrorList{field.Invalid(sAt("runAsUser"), nil, "")}},
		{name: "negative retry", flow: one(sdk.Retry(-1)), want: field.ErrorList{field.Invalid(sAt("retry"), nil, "")}},
		{name: "negative backoff", flow: one(sdk.RetryBackoff(-time.Second)), want: field.ErrorList{field.Invalid(sAt("retryBackoff"), nil, "")}},
		{name: "timeout zero", flow: one(sdk.Timeout(0)), want: field.ErrorList{field.Invalid(sAt("timeout"), nil, "")}},
		{name: "timeout under a second", flow: one(sdk.Timeout(500 * time.Millisecond)), want: field.ErrorList{field.Invalid(sAt("timeout"), nil, "")}},
		{name: "timeout negative", flow: one(sdk.Timeout(-time.Hour)), want: field.ErrorList{field.Invalid(sAt("timeout"), nil, "")}},
		{name: "cpu not a quantity", flow: one(sdk.CPU("abc")), want: field.ErrorList{field.Invalid(sAt("cpu"), nil, "")}},
		{name: "cpu negative", flow: one(sdk.CPU("-1")), want: field.ErrorList{field.Invalid(sAt("cpu"), nil, "")}},
		{name: "memory zero", flow: one(sdk.Memory("0")), want: field.ErrorList{field.Invalid(sAt("memory"), nil, "")}},
		{name: "memory not a quantity", flow: one(sdk.Memory("16 GB")), want: field.ErrorList{field.Invalid(sAt("memory"), nil, "")}},
		{name: "disk not a quantity", flow: one(sdk.Disk("lots")), want: field.ErrorList{field.Invalid(sAt("disk"), nil, "")}},
		{name: "shared memory zero", flow: one(sdk.SharedMemory("0")), want: field.ErrorList{field.Invalid(sAt("sharedMemory"), nil, "")}},
	})
}

// TestTextMustBeUTF8: every target's format would change bytes that are not UTF-8 on
// the way to the pod, so they are refused where the user wrote them.
func TestTextMustBeUTF8(t *testing.T) {
	bad := "\xda"
	f := sdk.NewFlow("f", sdk.Image(img), sdk.Param("p", bad)).
		Step("s", sdk.Command("echo", bad), sdk.Env("VALUE", bad), sdk.Foreach("ok", bad),
			sdk.Annotation("example.com/note", bad))
	wantErrs(t, f, compile.Options{}, field.ErrorList{
		field.Invalid(field.NewPath("params").Key("p"), nil, ""),
		field.Invalid(sAt("command").Index(1), nil, ""),
		field.Invalid(sAt("foreach").Index(1), nil, ""),
		field.Invalid(sAt("env").Key("VALUE"), nil, ""),
		field.Invalid(sAt("annotations").Key("example.com/note"), nil, ""),
	})
	// Text that is UTF-8, however odd, is kept as it is.
	odd := "ünïcödé ✓ \x7f\t\n"
	s := mustStep(t, one(sdk.Env("VALUE", odd)), compile.Options{}, "s")
	if s.Env[0].Value != odd {
		t.Errorf("env value = %q, want %q", s.Env[0].Value, odd)
	}
}

// TestRunAsNonRootWhereKnown: runAsNonRoot is claimed only where the plan knows
// the step's user: a non-zero RunAsUser, or a Run step on the flow's own image
// built on the default base (distroless :nonroot), as image build recorded it or
// as manifold.toml's base_image says it will be built. Another image, a Run
// step's image on another base, and an explicit RunAsNonRoot(false) or root are
// left alone.
func TestRunAsNonRootWhereKnown(t *testing.T) {
	const img = "example.com/f:v1"
	run := func(nop *sdk.Context) error { return nil }
	record := func(base string) *built.Record {
		return &built.Record{Flow: "f", Reference: "example.com/f@sha256:" + strings.Repeat("0", 64), Base: base}
	}
	for _, tc := range []struct {
		name string
		step []sdk.StepOption
		o    compile.Options
		want *bool
	}{
		{"run step, default base", []sdk.StepOption{sdk.Run(run)}, compile.Options{}, ptr(true)},
		{"run step, base_image is the default", []sdk.StepOption{sdk.Run(run)}, compile.Options{Config: compile.Config{BaseImage: image.DefaultBase}}, ptr(true)},
		{"run step, base_image another", []sdk.StepOption{sdk.Run(run)}, compile.Options{Config: compile.Config{BaseImage: "python:3.12"}}, nil},
		{"run step, built on the default base", []sdk.StepOption{sdk.Run(run)}, compile.Options{BuiltImage: record(image.DefaultBase)}, ptr(true)},
		{"run step, built on scratch", []sdk.StepOption{sdk.Run(run)}, compile.Options{BuiltImage: record(image.Scratch)}, nil},
		// The record says what the image is; the config's base only says what
		// the next build would use.
		{"run step, built on scratch, base_image the default", []sdk.StepOption{sdk.Run(run)}, compile.Options{BuiltImage: record(image.Scratch), Config: compile.Config{BaseImage: image.DefaultBase}}, nil},
		{"run step, RunAsNonRoot(false)", []sdk.StepOption{sdk.Run(run), sdk.RunAsNonRoot(false)}, compile.Options{}, ptr(false)},
		{"run step, as root", []sdk.StepOption{sdk.Run(run), sdk.RunAsUser(0)}, compile.Options{}, nil},
		{"command step", []sdk.StepOption{sdk.Command("true")}, compile.Options{}, nil},
		{"command step as a user", []sdk.StepOption{sdk.Command("true"), sdk.RunAsUser(1000)}, compile.Options{}, ptr(true)},
		{"command step as root", []sdk.StepOption{sdk.Command("true"), sdk.RunAsUser(0)}, compile.Options{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := mustStep(t, sdk.NewFlow("f", sdk.Image(img)).Step("s", tc.step...), tc.o, "s")
			if diff := cmp.Diff(tc.want, s.RunAsNonRoot); diff != "" {
				t.Errorf("RunAsNonRoot (-want +got):\n%s", diff)
			}
		})
	}
}

// TestVolumePathDuplicate: a second volume at a path names the field, the
// volume mounted there first, and what to do.
func TestVolumePathDuplicate(t *testing.T) {
	errs := wantErrs(t, one(sdk.Volume("a", "/data"), sdk.Volume("b", "/data")), compile.Options{}, field.ErrorList{field.Duplicate(sAt("volumes").Index(1).Child("path"), nil)})
	wantDetail(t, errs, 0, "volumes[0] (claim a) is mounted at /data already: mount claim b at another path, or leave one of them out")
}
