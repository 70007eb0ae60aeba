package compile

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// ConfigFile is the name of the config file the CLI reads beside a flow.
const ConfigFile = "manifold.toml"

// Config holds the defaults of manifold.toml. Options in code override them: a
// step's own option wins over the flow's, which wins over the config's.
//
//	namespace = "ml"
//	image = "registry.example.com/ml/flow:v1"
//	entrypoint = "/usr/local/bin/neuron-train"
//	service_account = "trainer"
//	image_pull_policy = "IfNotPresent"
//	image_pull_secrets = ["ecr"]
//	gpu_toleration = false
//	argo_multi_node = "jobset"
//	argo_max_bytes = 1572864
//	artifacts = "s3://ml-artifacts/flows"
//	artifacts_endpoint = "http://minio.storage:9000"
//	base_image = "gcr.io/distroless/static-debian12:nonroot"
//	image_from_build = true
//	efa_wiring = true
//	efa_arch = "x86_64"
//	queue = "team-a"
//
//	[labels]
//	team = "ml"
//
//	[node_selector]
//	"karpenter.sh/capacity-type" = "on-demand"
//
//	[[tolerations]]
//	key = "dedicated"
//	value = "ml"
//	effect = "NoSchedule"
//
//	[device_classes]
//	neuron = "neuron.aws.com"
type Config struct {
	// Namespace is the namespace of every step that names none, as
	// sdk.Namespace on the flow.
	Namespace string `toml:"namespace"`
	// Image is the image of every step that names none, as sdk.Image on the
	// flow; image build pushes to it when --tag names no other.
	Image string `toml:"image"`
	// Entrypoint is the path of the flow program in a Run step's image; the
	// step's container runs `<entrypoint> step <step>`. Default:
	// /usr/local/bin/<flow name>.
	Entrypoint string `toml:"entrypoint"`
	// ServiceAccount is the service account of every step's pods that names
	// none, as sdk.ServiceAccount on the flow.
	ServiceAccount string `toml:"service_account"`
	// ImagePullPolicy is the pull policy of every step's container that names
	// none (Always, IfNotPresent or Never), as sdk.ImagePullPolicy.
	ImagePullPolicy string `toml:"image_pull_policy"`
	// ImagePullSecrets are Secrets every step's pods pull their images with, as
	// sdk.ImagePullSecret on the flow.
	ImagePullSecrets []string `toml:"image_pull_secrets"`
	// Labels are labels of every step's pods, as sdk.Label on the flow.
	Labels map[string]string `toml:"labels"`
	// Annotations are annotations of every step's pods, as sdk.Annotation on
	// the flow.
	Annotations map[string]string `toml:"annotations"`
	// NodeSelector is added to every step's node selector, as sdk.NodeSelector
	// on the flow.
	NodeSelector map[string]string `toml:"node_selector"`
	// Tolerations are added to every step's pods, as sdk.Toleration on the
	// flow.
	Tolerations []ConfigToleration `toml:"tolerations"`
	// Env is environment every step's container gets, as sdk.Env on the flow
	// (a step's own variable of the same name wins).
	Env map[string]string `toml:"env"`
	// Secrets are Secrets every step's container gets whole as environment
	// (envFrom), as sdk.Secret on the flow: the way to give every pod the
	// artifact store's credentials, say.
	Secrets []string `toml:"secrets"`
	// HostNetwork, when true, runs every step's pods in their node's network
	// namespace, as sdk.HostNetwork(true) on the flow.
	HostNetwork bool `toml:"host_network"`
	// GPUToleration, when false, stops GPU steps from tolerating the
	// nvidia.com/gpu or amd.com/gpu taint. It is on when unset.
	GPUToleration *bool `toml:"gpu_toleration"`
	// ArgoMultiNode is how the argo target runs a multi-node step: "jobset" (the
	// default) creates its JobSet, "job" its Indexed Job and headless Service.
	ArgoMultiNode string `toml:"argo_multi_node"`
	// ArgoMaxBytes is the largest WorkflowTemplate the argo target writes, in
	// bytes of YAML: 0 (unset) for plan.DefaultArgoMaxBytes. A flow larger
	// than this (or than argo.PartMaxBytes) is split into parts, each a
	// WorkflowTemplate within it, run by a parent. -1 for no limit and no
	// split (for a cluster whose etcd takes larger requests and whose Argo
	// offloads node status).
	ArgoMaxBytes int `toml:"argo_max_bytes"`
	// Artifacts is where the flow's steps keep their artifacts on a cluster:
	// s3://bucket/prefix, or pvc://CLAIM for a ReadWriteMany volume (as
	// sdk.ArtifactVolume(CLAIM)). Empty: nowhere shared.
	Artifacts string `toml:"artifacts"`
	// ArtifactsEndpoint is the endpoint of an S3-compatible server that holds
	// the s3:// store, such as http://minio.storage:9000.
	ArtifactsEndpoint string `toml:"artifacts_endpoint"`
	// BaseImage is the image `image build` adds the flow program to when --base
	// names none ("scratch" for an empty one).
	BaseImage string `toml:"base_image"`
	// ImageFromBuild, when true, makes every Run step's image the one `image build`
	// last recorded (.manifold/image.json), as compile --image-from-build does.
	ImageFromBuild bool `toml:"image_from_build"`
	// EFAWiring, when true, wires every step that asks for EFA, as sdk.EFAWiring
	// on the flow does.
	EFAWiring bool `toml:"efa_wiring"`
	// EFAArch is the architecture of the steps' images for EFA wiring's library
	// paths, as sdk.EFAArch: "x86_64" (the default) or "aarch64".
	EFAArch string `toml:"efa_arch"`
	// Queue is the Kueue LocalQueue of every step that names none, as
	// sdk.Queue on the flow.
	Queue string `toml:"queue"`
	// DeviceClasses names the DeviceClasses sdk.DRA claims devices from.
	DeviceClasses ConfigDeviceClasses `toml:"device_classes"`
}

// ConfigToleration is a toleration in manifold.toml. Operator defaults to Equal
// when a value is given and to Exists otherwise.
type ConfigToleration struct {
	// Key is the taint's key.
	Key string `toml:"key"`
	// Operator is Equal or Exists.
	Operator string `toml:"operator"`
	// Value is the taint's value, for Equal.
	Value string `toml:"value"`
	// Effect is the taint's effect: NoSchedule, PreferNoSchedule or NoExecute;
	// empty for all.
	Effect string `toml:"effect"`
}

// DefaultEntrypoint is the path of the flow binary in its image when manifold.toml
// sets no entrypoint: /usr/local/bin/<flow name>. A Run step's container runs
// `<entrypoint> step <step name>`.
func DefaultEntrypoint(flow string) string { return "/usr/local/bin/" + flow }

// LoadConfig reads a manifold.toml. Keys it does not know are an error, so that a
// misspelt key is not silently ignored; the error names the key most likely
// meant. A value of the wrong type is an error naming its line and key.
func LoadConfig(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := decodeConfig(path, string(data), &c); err != nil {
		return Config{}, err
	}
	if !validArgoMultiNode(c.ArgoMultiNode) {
		return Config{}, fmt.Errorf("%s: argo_multi_node = %q: %s", path, c.ArgoMultiNode, argoMultiNodeChoice)
	}
	return c, nil
}

// argoMultiNodeChoice says what argo_multi_node may be.
const argoMultiNodeChoice = `choose "` + plan.ArgoJobSet + `" (the argo target creates a multi-node step's JobSet, which needs the JobSet controller) or "` + plan.ArgoJob + `" (its Indexed Job and headless Service)`

func validArgoMultiNode(v string) bool {
	return v == "" || v == plan.ArgoJobSet || v == plan.ArgoJob
}

// stepDefaults returns the config's defaults as a step spec, the lowest layer of
// every step.
func (c Config) stepDefaults() sdk.StepSpec {
	var s sdk.StepSpec
	str := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	s.Namespace = str(c.Namespace)
	s.Image = str(c.Image)
	s.ServiceAccount = str(c.ServiceAccount)
	s.ImagePullPolicy = str(c.ImagePullPolicy)
	s.ImagePullSecrets = append(s.ImagePullSecrets, c.ImagePullSecrets...)
	if c.EFAWiring {
		s.EFAWiring = &c.EFAWiring
	}
	s.EFAArch = str(c.EFAArch)
	s.Queue = str(c.Queue)
	if c.HostNetwork {
		s.HostNetwork = &c.HostNetwork
	}
	s.Secrets = append(s.Secrets, c.Secrets...)
	for _, kv := range sortedKeyValues(c.Env) {
		s.Env = append(s.Env, sdk.EnvSpec{Name: kv.Key, Value: kv.Value})
	}
	s.Labels = sortedKeyValues(c.Labels)
	s.Annotations = sortedKeyValues(c.Annotations)
	s.NodeSelector = sortedKeyValues(c.NodeSelector)
	for _, t := range c.Tolerations {
		op := t.Operator
		if op == "" {
			op = "Exists"
			if t.Value != "" {
				op = "Equal"
			}
		}
		s.Tolerations = append(s.Tolerations, sdk.TolerationSpec{Key: t.Key, Operator: op, Value: t.Value, Effect: t.Effect})
	}
	return s
}

func sortedKeyValues(m map[string]string) []sdk.KeyValue {
	if len(m) == 0 {
		return nil
	}
	out := make([]sdk.KeyValue, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, sdk.KeyValue{Key: k, Value: m[k]})
	}
	return out
}
