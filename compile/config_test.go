package compile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "manifold.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestConfigFile(t *testing.T) {
	if compile.ConfigFile != "manifold.toml" {
		t.Errorf("ConfigFile = %q, want manifold.toml", compile.ConfigFile)
	}
}

func TestLoadConfig(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name, text string
		want       compile.Config
	}{
		{name: "empty", text: "", want: compile.Config{}},
		{
			name: "every key",
			text: `
namespace = "ml"
image = "registry.example.com/ml/flow:v1"
entrypoint = "/usr/local/bin/neuron-train"
service_account = "trainer"
image_pull_policy = "IfNotPresent"
image_pull_secrets = ["ecr", "ghcr"]
gpu_toleration = false
argo_multi_node = "job"
artifacts = "s3://ml-artifacts/flows"
artifacts_endpoint = "http://minio.storage:9000"
host_network = true
secrets = ["s3-credentials"]

[env]
AWS_REGION = "us-west-2"

[labels]
team = "ml"

[annotations]
"example.com/owner" = "ml-platform"

[node_selector]
"karpenter.sh/capacity-type" = "on-demand"

[[tolerations]]
key = "dedicated"
value = "ml"
effect = "NoSchedule"

[[tolerations]]
key = "spot"
operator = "Exists"
`,
			want: compile.Config{
				Namespace:        "ml",
				Image:            "registry.example.com/ml/flow:v1",
				Entrypoint:       "/usr/local/bin/neuron-train",
				ServiceAccount:   "trainer",
				ImagePullPolicy:  "IfNotPresent",
				ImagePullSecrets: []string{"ecr", "ghcr"},
				Labels:           map[string]string{"team": "ml"},
				Annotations:      map[string]string{"example.com/owner": "ml-platform"},
				NodeSelector:     map[string]string{"karpenter.sh/capacity-type": "on-demand"},
				Tolerations: []compile.ConfigToleration{
					{Key: "dedicated", Value: "ml", Effect: "NoSchedule"},
					{Key: "spot", Operator: "Exists"},
				},
				GPUToleration:     &off,
				ArgoMultiNode:     "job",
				Artifacts:         "s3://ml-artifacts/flows",
				ArtifactsEndpoint: "http://minio.storage:9000",
				HostNetwork:       true,
				Secrets:           []string{"s3-credentials"},
				Env:               map[string]string{"AWS_REGION": "us-west-2"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compile.LoadConfig(writeConfig(t, tc.text))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		// mention is what the error must name.
		mention string
	}{
		{name: "unknown key", text: "namespace = \"ml\"\nnamespcae = \"ml\"\n", mention: "namespcae"},
		{name: "unknown toleration key", text: "[[tolerations]]\nkey = \"k\"\nefect = \"NoSchedule\"\n", mention: "efect"},
		{name: "wrong type", text: "gpu_toleration = \"no\"\n", mention: "gpu_toleration"},
		{name: "not toml", text: "namespace = \n", mention: "manifold.toml"},
		{name: "argo multi-node mode", text: "argo_multi_node = \"jobsets\"\n", mention: `argo_multi_node = "jobsets": choose "jobset"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := compile.LoadConfig(writeConfig(t, tc.text))
			if err == nil {
				t.Fatalf("LoadConfig succeeded with %+v", got)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("error %q does not mention %q", err, tc.mention)
			}
			if diff := cmp.Diff(compile.Config{}, got); diff != "" {
				t.Errorf("a failed LoadConfig returned a config (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("missing file", func(t *testing.T) {
		if _, err := compile.LoadConfig(filepath.Join(t.TempDir(), "manifold.toml")); !os.IsNotExist(err) {
			t.Errorf("err = %v, want a not-exist error", err)
		}
	})
}

// TestLoadConfigSays: an unknown key is named with the key most likely meant,
// and a value of the wrong type with its line, its key and the type it needs,
// in the config's own words rather than the TOML library's.
func TestLoadConfigSays(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{name: "misspelt key", text: "namespace = \"ml\"\nimagee = \"x\"\n",
			want: "manifold.toml: unknown key imagee (did you mean image?); known keys are namespace, image, "},
		{name: "misspelt keys", text: "imagee = \"x\"\nzzz = 1\n[labelz]\na = \"b\"\n",
			want: "manifold.toml: unknown keys imagee (did you mean image?), zzz, labelz (did you mean labels?); known keys are "},
		{name: "misspelt toleration key", text: "[[tolerations]]\nkey = \"k\"\nefect = \"NoSchedule\"\n",
			want: "manifold.toml: unknown key tolerations.efect (did you mean tolerations.effect?); known keys of tolerations are key, operator, value and effect"},
		{name: "string for a list", text: "namespace = \"ml\"\nimage_pull_secrets = \"ecr\"\n",
			want: "manifold.toml:2: key image_pull_secrets: want a list of strings, got a string"},
		{name: "string for a bool", text: "gpu_toleration = \"no\"\n",
			want: "manifold.toml:1: key gpu_toleration: want true or false, got a string"},
		{name: "string for a number", text: "\n\nargo_max_bytes = \"1MB\"\n",
			want: "manifold.toml:3: key argo_max_bytes: want a whole number, got a string"},
		{name: "string for a table", text: "labels = \"team\"\n",
			want: "manifold.toml:1: key labels: want a table of strings, got a string"},
		{name: "number in a table", text: "[labels]\nteam = 7\n",
			want: "manifold.toml:2: key labels.team: want a string, got an integer"},
		{name: "table for a list of tables", text: "[tolerations]\nkey = \"k\"\n",
			want: "manifold.toml:1: key tolerations: want a list of tables ([[tolerations]]), got a table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := compile.LoadConfig(writeConfig(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "destination has type") {
				t.Errorf("error %v is in the TOML library's words", err)
			}
		})
	}
}

func TestConfigApplies(t *testing.T) {
	cfg := compile.Config{
		Namespace:        "ml",
		Image:            img,
		ServiceAccount:   "trainer",
		ImagePullPolicy:  "IfNotPresent",
		ImagePullSecrets: []string{"ecr"},
		Labels:           map[string]string{"team": "ml"},
		Annotations:      map[string]string{"example.com/owner": "platform"},
		NodeSelector:     map[string]string{"karpenter.sh/capacity-type": "on-demand"},
		Env:              map[string]string{"AWS_REGION": "us-west-2", "LEVEL": "config"},
		Secrets:          []string{"s3-credentials"},
		HostNetwork:      true,
	}
	f := sdk.NewFlow("f").Step("s", sdk.Command("true"), sdk.ImagePullSecret("ghcr"), sdk.Env("LEVEL", "step"), sdk.Secret("wandb"))
	got := mustStep(t, f, compile.Options{Config: cfg}, "s")
	want := with(func(s *plan.Step) {
		s.Namespace = "ml"
		s.ServiceAccount = "trainer"
		s.ImagePullPolicy = "IfNotPresent"
		s.ImagePullSecrets = []string{"ecr", "ghcr"}
		s.Labels = labels("f", "s", plan.KeyValue{Key: "team", Value: "ml"})
		s.Annotations = []plan.KeyValue{{Key: "example.com/owner", Value: "platform"}}
		s.NodeSelector = []plan.KeyValue{{Key: "karpenter.sh/capacity-type", Value: "on-demand"}}
		s.HostNetwork = true
		s.Secrets = []string{"s3-credentials", "wandb"}
	})
	// The step's own LEVEL wins; AWS_REGION comes from the config.
	env := map[string]string{}
	for _, e := range got.Env {
		env[e.Name] = e.Value
	}
	if env["LEVEL"] != "step" || env["AWS_REGION"] != "us-west-2" {
		t.Errorf("env %+v: want LEVEL=step (the step's own) and AWS_REGION=us-west-2 (the config's)", got.Env)
	}
	want.Env = got.Env
	if diff := cmp.Diff(want, got, planOpts); diff != "" {
		t.Errorf("step (-want +got):\n%s", diff)
	}
}

// TestArgoMultiNodeReachesThePlan: the plan carries manifold.toml's
// argo_multi_node, and "jobset" when it is unset.
func TestArgoMultiNodeReachesThePlan(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img)).Step("s", sdk.Command("true"))
	for set, want := range map[string]string{"": plan.ArgoJobSet, "jobset": plan.ArgoJobSet, "job": plan.ArgoJob} {
		if got := mustCompile(t, f, compile.Options{Config: compile.Config{ArgoMultiNode: set}}).ArgoMultiNode; got != want {
			t.Errorf("argo_multi_node %q: plan has %q, want %q", set, got, want)
		}
	}
}

func TestConfigPrecedence(t *testing.T) {
	cfg := compile.Config{
		Image:        "config:v1",
		Namespace:    "config",
		Labels:       map[string]string{"team": "config", "tier": "config"},
		NodeSelector: map[string]string{"zone": "config", "pool": "config"},
	}
	f := sdk.NewFlow("f", sdk.Image("flow:v1"), sdk.Label("team", "flow"), sdk.NodeSelector("zone", "flow")).
		Step("own", sdk.Command("true"), sdk.Image("step:v1"), sdk.Namespace("step"),
			sdk.Label("team", "step"), sdk.NodeSelector("zone", "step"), sdk.NodeSelector("pool", "step")).
		Step("flow", sdk.Command("true"))
	p := mustCompile(t, f, compile.Options{Config: cfg})

	for _, tc := range []struct {
		step, image, namespace string
		labels, selector       []plan.KeyValue
	}{
		{
			step: "own", image: "step:v1", namespace: "step",
			labels:   labels("f", "own", plan.KeyValue{Key: "team", Value: "step"}, plan.KeyValue{Key: "tier", Value: "config"}),
			selector: []plan.KeyValue{{Key: "pool", Value: "step"}, {Key: "zone", Value: "step"}},
		},
		{
			step: "flow", image: "flow:v1", namespace: "config",
			labels:   labels("f", "flow", plan.KeyValue{Key: "team", Value: "flow"}, plan.KeyValue{Key: "tier", Value: "config"}),
			selector: []plan.KeyValue{{Key: "pool", Value: "config"}, {Key: "zone", Value: "flow"}},
		},
	} {
		s := p.Step(tc.step)
		if s.Image != tc.image || s.Namespace != tc.namespace {
			t.Errorf("%s: image %q, namespace %q; want %q, %q", tc.step, s.Image, s.Namespace, tc.image, tc.namespace)
		}
		if diff := cmp.Diff(tc.labels, s.Labels); diff != "" {
			t.Errorf("%s: labels (-want +got):\n%s", tc.step, diff)
		}
		if diff := cmp.Diff(tc.selector, s.NodeSelector); diff != "" {
			t.Errorf("%s: node selector (-want +got):\n%s", tc.step, diff)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	cfg := func(c compile.Config) compile.Options { return compile.Options{Config: c} }
	two := sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true")).Step("b", sdk.Command("true"))
	runErrorCases(t, []errorCase{
		{
			name: "reserved label, once for every step",
			flow: two,
			opts: cfg(compile.Config{Labels: map[string]string{"manifold.dev/team": "ml"}}),
			want: field.ErrorList{field.Forbidden(field.NewPath("config", "labels").Key("manifold.dev/team"), "")},
		},
		{
			name: "label value",
			flow: two,
			opts: cfg(compile.Config{Labels: map[string]string{"team": "machine learning"}}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "labels").Key("team"), nil, "")},
		},
		{
			name: "pull policy",
			flow: two,
			opts: cfg(compile.Config{ImagePullPolicy: "Sometimes"}),
			want: field.ErrorList{field.NotSupported[string](field.NewPath("config", "image_pull_policy"), nil, nil)},
		},
		{
			name: "pull secret",
			flow: two,
			opts: cfg(compile.Config{ImagePullSecrets: []string{"ok", "Bad_Name"}}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "image_pull_secrets").Index(1), nil, "")},
		},
		{
			name: "namespace",
			flow: two,
			opts: cfg(compile.Config{Namespace: "ML"}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "namespace"), nil, "")},
		},
		{
			name: "service account",
			flow: two,
			opts: cfg(compile.Config{ServiceAccount: "Bad_Name"}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "service_account"), nil, "")},
		},
		{
			name: "image with a space",
			flow: sdk.NewFlow("f").Step("a", sdk.Command("true")).Step("b", sdk.Command("true")),
			opts: cfg(compile.Config{Image: "ubuntu latest"}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "image"), nil, "")},
		},
		{
			name: "argo multi-node mode",
			flow: two,
			opts: cfg(compile.Config{ArgoMultiNode: "pods"}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "argo_multi_node"), nil, "")},
		},
		{
			name: "a bad config value is reported while any step uses it",
			flow: sdk.NewFlow("f", sdk.Image(img)).Step("a", sdk.Command("true"), sdk.Namespace("ml")).Step("b", sdk.Command("true")),
			opts: cfg(compile.Config{Namespace: "ML"}),
			want: field.ErrorList{field.Invalid(field.NewPath("config", "namespace"), nil, "")},
		},
	})
}
