// Package plan holds a compiled flow: plain data, defaults applied, aliases resolved,
// every rule checked, steps in dependency order. Emitters and runtimes read a plan;
// nothing here has behaviour beyond lookups.
package plan

import (
	"slices"
	"strings"
	"time"
)

// Well-known resource names, labels and taint keys.
const (
	ResourceNeuron = "aws.amazon.com/neuron"
	ResourceEFA    = "vpc.amazonaws.com/efa"
	ResourceNVIDIA = "nvidia.com/gpu"
	ResourceAMD    = "amd.com/gpu"

	LabelInstanceType = "node.kubernetes.io/instance-type"
	// LabelInstanceFamily is the node label Karpenter gives an instance's family.
	LabelInstanceFamily = "karpenter.k8s.aws/instance-family"
	LabelName           = "app.kubernetes.io/name"
	LabelPartOf         = "app.kubernetes.io/part-of"
	LabelFlow           = "manifold.dev/flow"
	LabelStep           = "manifold.dev/step"
	// LabelRun carries the run ID on everything a runtime creates for a run, pods
	// included; compiled output has none.
	LabelRun = "manifold.dev/run"
	// LabelRunUID carries, beside LabelRun, the UID a runtime gives each run:
	// two runs of a flow under one run ID (the second started after the first's
	// record was lost) tell their objects apart by it.
	LabelRunUID = "manifold.dev/run-uid"
	// LabelIndex carries a foreach item's index on the objects made for that item
	// (not on its pods, which are the step's pod).
	LabelIndex = "manifold.dev/index"
	// AnnotationAfter lists, comma-separated, the steps a step's objects wait for.
	AnnotationAfter = "manifold.dev/after"
	// Kueue's keys, as sigs.k8s.io/kueue v0.17.0 defines them:
	// LabelQueueName and LabelPriorityClass are QueueLabel and
	// WorkloadPriorityClassLabel in pkg/controller/constants/constants.go, and
	// AnnotationRequiredTopology is PodSetRequiredTopologyAnnotation in
	// apis/kueue/v1beta2/topology_types.go. They are copied rather than
	// imported: those packages bring controller-runtime with them.
	LabelQueueName             = "kueue.x-k8s.io/queue-name"
	LabelPriorityClass         = "kueue.x-k8s.io/priority-class"
	AnnotationRequiredTopology = "kueue.x-k8s.io/podset-required-topology"
	// PartOf is the value of LabelPartOf on everything Manifold makes.
	PartOf = "manifold"

	// EnvItem and EnvIndex carry a foreach step's item and zero-based index.
	EnvItem = "MANIFOLD_ITEM"
	// EnvCount carries the number of items of a foreach step.
	EnvCount = "MANIFOLD_COUNT"
	EnvIndex = "MANIFOLD_INDEX"
	// EnvItemFile names the file that holds the item of a fan-out that runs
	// as one Indexed Job, where the pods share one spec and no MANIFOLD_ITEM.
	EnvItemFile = "MANIFOLD_ITEM_FILE"
	// EnvValues names a directory in which a step publishes the values that a
	// later step's sdk.ForeachOf or sdk.When reads: the value name as
	// <dir>/<name>.json, the same bytes as the artifact name. A Run step's
	// ctx.Put writes it; a Command step writes the file itself. Only a step
	// whose value is read so (Flow.Published) gets it, and only where its
	// runtime reads it: the local runner sets it to the step's artifact
	// directory (MANIFOLD_ARTIFACTS), so the one file is both; the argo
	// target mounts an emptyDir at ValuesPath, and Argo reads the file as the
	// step's output parameter.
	EnvValues = "MANIFOLD_VALUES"
	// EnvParamPrefix starts the variable that carries each flow param.
	EnvParamPrefix = "MANIFOLD_PARAM_"
	// EnvRunDir is the run directory that holds every step's artifacts.
	EnvRunDir = "MANIFOLD_RUN_DIR"
	// EnvArtifacts is a step's own artifact directory, <run dir>/<step>[/<index>],
	// where a Command step keeps what it makes.
	EnvArtifacts = "MANIFOLD_ARTIFACTS"
	// EnvArtifactStore is the root of a flow's artifact store on a cluster: an
	// s3://bucket/prefix URL, or ArtifactVolumePath where the shared volume is
	// mounted. A run keeps its artifacts under <store>/<flow>/<run id>/.
	EnvArtifactStore = "MANIFOLD_ARTIFACT_STORE"
	// EnvTraceParent carries, when the run is traced, the W3C trace context of
	// the span a step's process or pod continues (sdk.Context.TraceParent).
	EnvTraceParent = "TRACEPARENT"
	// EnvRunID is the ID of the run a step belongs to, which names its directory
	// in the artifact store.
	EnvRunID = "MANIFOLD_RUN_ID"
	// EnvS3Endpoint overrides the S3 endpoint, for S3-compatible servers.
	EnvS3Endpoint = "MANIFOLD_S3_ENDPOINT"

	// The rendezvous variables every node of a multi-node step gets.
	EnvNodeRank      = "MANIFOLD_NODE_RANK"
	EnvNumNodes      = "MANIFOLD_NUM_NODES"
	EnvMasterAddr    = "MASTER_ADDR"
	EnvMasterPort    = "MASTER_PORT"
	EnvPETNNodes     = "PET_NNODES"
	EnvPETNodeRank   = "PET_NODE_RANK"
	EnvPETMasterAddr = "PET_MASTER_ADDR"
	EnvPETMasterPort = "PET_MASTER_PORT"
	// EnvNeuronRootComm is the Neuron runtime's root communicator, rank 0's
	// address and NeuronRootCommPort; set on multi-node Trainium steps.
	EnvNeuronRootComm = "NEURON_RT_ROOT_COMM_ID"

	// DefaultPort is the rendezvous port of a multi-node step without sdk.Port:
	// torchrun's default.
	DefaultPort = 29500
	// NeuronRootCommPort is where rank 0's Neuron runtime listens for the others.
	NeuronRootCommPort = 46820

	// ContainerName is the name of every step's container (Argo requires "main").
	ContainerName = "main"

	// ArtifactVolumeName is the pod volume of a flow's shared artifact volume,
	// mounted at ArtifactVolumePath in every step's container.
	ArtifactVolumeName = "manifold-artifacts"
	ArtifactVolumePath = "/manifold/artifacts"
	// DefaultRunID is the run ID of the job and jobset targets' pods when no
	// runtime names the run (Flow.Run is empty): compiled output applied by hand
	// is one run at a time, as its object names are.
	DefaultRunID = "default"
)

// Flow is a compiled flow.
type Flow struct {
	Name   string
	Params []Param
	// Schedule is a cron expression, "" for none.
	Schedule string
	// Steps are in dependency order: every step comes after the steps it waits for,
	// and otherwise in declaration order.
	Steps []Step
	// ArgoMultiNode is how the argo target runs a multi-node step: ArgoJobSet or
	// ArgoJob.
	ArgoMultiNode string
	// ArgoMaxBytes is the largest WorkflowTemplate the argo target writes, in
	// bytes of YAML, splitting a larger flow into parts; -1 for no limit (and
	// no split), 0 for DefaultArgoMaxBytes.
	ArgoMaxBytes int
	// Run is the ID of the run a runtime makes the job or jobset target's objects
	// for (or that compile --run-id names), "" when compiling. With it every pod
	// carries LabelRun, and every object name ends in a short hash of it, so the
	// runs of a flow never collide in a namespace.
	Run string
	// RunUID is the UID of the run a runtime makes the objects for, carried by
	// every pod and object as LabelRunUID; "" for none (compile --run-id).
	RunUID string
	// Artifacts is where steps on a cluster keep their artifacts; nil when the
	// flow has no artifact store (a pod then keeps them in its own file system).
	Artifacts *Artifacts
}

// Artifacts is a flow's artifact store on a cluster. Every step's pod gets its
// variables (EnvArtifactStore, EnvRunID, EnvRunDir, EnvArtifacts) and, for a
// volume, the volume.
type Artifacts struct {
	// URL is the store's root: s3://bucket/prefix, or ArtifactVolumePath when
	// Claim is set.
	URL string
	// Endpoint is the S3 endpoint of an S3-compatible server, "" for AWS's own.
	Endpoint string
	// Claim is the ReadWriteMany PersistentVolumeClaim mounted at URL in every
	// pod; "" for S3.
	Claim string
}

// DefaultArgoMaxBytes is the largest WorkflowTemplate the argo target writes
// unless manifold.toml's argo_max_bytes says otherwise: 1 MiB. The API server
// stores each object in etcd in one request, at most 1.5 MiB by default (etcd's
// --max-request-bytes), and the stored object is its JSON with the metadata the
// server adds; 1 MiB of YAML leaves room for both.
const DefaultArgoMaxBytes = 1 << 20

// The ways the argo target can run a multi-node step (manifold.toml's
// argo_multi_node).
const (
	// ArgoJobSet creates the step's JobSet, as the jobset target builds it.
	ArgoJobSet = "jobset"
	// ArgoJob creates the step's headless Service and Indexed Job, as the job
	// target builds them.
	ArgoJob = "job"
)

// Param is a flow parameter with its value for this compile (the default, or what
// --param gave).
type Param struct {
	Name  string
	Value string
	// Env is the variable that carries it: MANIFOLD_PARAM_<NAME>.
	Env string
}

// Body says what a step's container runs.
type Body int

const (
	// BodyRun runs a Go function of the flow through its own binary.
	BodyRun Body = iota + 1
	// BodyCommand runs an argv in the step's image.
	BodyCommand
)

// Step is one compiled step.
type Step struct {
	Name string
	Body Body
	// Command is the container's full argv: for a Run step the flow binary's
	// `<entrypoint> step <name>`.
	Command []string
	// After lists the steps this one waits for, in declaration order.
	After []string
	// Foreach holds the fan-out items; nil for a step that runs once.
	Foreach []string
	// ForeachOf names the list an earlier step puts that the step fans out
	// over at run time (sdk.ForeachOf); nil for a static step.
	ForeachOf *ValueRef
	// When is the value the step's run depends on (sdk.When); nil for a step
	// that runs whenever its dependencies succeed.
	When *Condition

	Namespace        string
	Image            string
	ImagePullPolicy  string
	ImagePullSecrets []string
	ServiceAccount   string

	// Requests and Limits are the container's resources, sorted by name; extended
	// resources (Neuron, EFA, GPUs, Resource options) appear in both.
	Requests []Quantity
	Limits   []Quantity
	// Neuron, EFA and GPU are the accelerator counts behind Requests and Limits
	// (Inferentia is already Neuron); GPUResource names the GPU resource.
	Neuron      int
	EFA         int
	GPU         int
	GPUResource string
	// EFAAll is set when EFA is every interface of the instance type
	// (sdk.EFAAll): the catalog's count when compiling, the count the target nodes
	// advertise when checking or running on a cluster.
	EFAAll bool
	// SharedMemory is the size limit of the memory-backed /dev/shm, "" for none
	// (and for no limit when EFAWiring mounts it).
	SharedMemory string
	// EFAWiring is what sdk.EFAWiring adds to the pod so that libfabric, NCCL and
	// the Neuron runtime use the step's EFA interfaces; nil without it.
	EFAWiring    *Wiring
	InstanceType string

	// NodeSelector is sorted by key.
	NodeSelector []KeyValue
	// Tolerations are the user's first, then those the step's accelerators need.
	Tolerations []Toleration
	// Apart is the node label whose value the pods of a multi-node step must all
	// differ in (kubernetes.io/hostname: one pod per node), and Together the one
	// whose value they must share (topology.kubernetes.io/zone, for EFA); "" for
	// none. Always "" for one pod.
	Apart, Together string

	// Queue is the Kueue LocalQueue (in Namespace) that admits the step, ""
	// for none. Priority is its pods' PriorityClass and, with a Queue, its
	// workload's WorkloadPriorityClass. Topology is the node label within one
	// value of which Kueue must place all its pods; set only with a Queue.
	Queue, Priority, Topology string

	// Env is the step's own environment in declaration order; the pod builder puts
	// the flow params and foreach variables before it.
	Env []EnvVar
	// Secrets are exposed whole as environment variables (envFrom).
	Secrets []string
	// Labels and Annotations are sorted by key; Labels include Manifold's own.
	Labels      []KeyValue
	Annotations []KeyValue
	Volumes     []Volume
	// Port is a container port the step declares, 0 for none; a multi-node step
	// always has one, its rendezvous port.
	Port int
	// Nodes is how many nodes run the step at once, each with the whole pod; 1 for
	// an ordinary step.
	Nodes int
	// RunAsUser and RunAsNonRoot are the pod's security context, nil when unset.
	// RunAsNonRoot is also true, unless the step says otherwise, where the
	// step's user is known not to be root: a non-zero RunAsUser, or a Run step
	// on the flow's own image built on a base that runs as non-root.
	RunAsUser    *int64
	RunAsNonRoot *bool
	// HostNetwork runs the step's pods in their node's network namespace.
	HostNetwork bool
	// NoArtifacts says the step's code neither puts nor gets artifacts
	// (sdk.NoArtifacts), so it needs no artifact store. It is left out of the
	// step's JSON when false, so that the digest of a step without it is what
	// it was before the field was added.
	NoArtifacts bool `json:",omitempty"`

	// Retry is how many times a failed attempt is retried (0: never).
	Retry        int
	RetryBackoff time.Duration
	// Timeout bounds each attempt; 0 for none.
	Timeout time.Duration

	// DRA, when set, is what the step's pods claim through Dynamic Resource
	// Allocation; its Neuron, EFA and GPU counts are then absent from Requests,
	// Limits and Tolerations.
	DRA *DRA
}

// Wiring is what a step's pod gets from sdk.EFAWiring.
type Wiring struct {
	// Arch is the image's architecture, as the EFA installer names its library
	// directories: ArchX86 or ArchARM.
	Arch string
	// Env is put before the step's own variables, without the ones the step sets
	// itself (its own value wins).
	Env []EnvVar
	// Capabilities are added to the container's Linux capabilities.
	Capabilities []string
}

// The image architectures sdk.EFAArch names.
const (
	ArchX86 = "x86_64"
	ArchARM = "aarch64"
)

// MountsSharedMemory reports whether the step's pod mounts a memory-backed
// /dev/shm: with sdk.SharedMemory, and always with EFA wiring.
func (s *Step) MountsSharedMemory() bool { return s.SharedMemory != "" || s.EFAWiring != nil }

// Quantity is a resource name and a canonical Kubernetes quantity.
type Quantity struct {
	Name  string
	Value string
}

// KeyValue is a label, annotation or node selector entry.
type KeyValue struct {
	Key, Value string
}

// Toleration is a pod toleration.
type Toleration struct {
	Key, Operator, Value, Effect string
}

// EnvVar is a plain variable, or one read from a Secret's key when SecretName is set.
type EnvVar struct {
	Name       string
	Value      string
	SecretName string
	SecretKey  string
}

// Volume mounts a PersistentVolumeClaim.
type Volume struct {
	// Name is the pod volume name, unique within the step.
	Name  string
	Claim string
	Path  string
}

// ParamEnv returns the variable that carries the flow param name into every step:
// MANIFOLD_PARAM_ and the name upper-cased, with '-' as '_'.
func ParamEnv(name string) string {
	return EnvParamPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Step returns the step called name, or nil.
func (f *Flow) Step(name string) *Step {
	for i := range f.Steps {
		if f.Steps[i].Name == name {
			return &f.Steps[i]
		}
	}
	return nil
}

// Param returns the param called name, or nil.
func (f *Flow) Param(name string) *Param {
	for i := range f.Params {
		if f.Params[i].Name == name {
			return &f.Params[i]
		}
	}
	return nil
}

// ValueRef names the artifact Name that step Step puts, read at run time by a
// dynamic step.
type ValueRef struct {
	Step, Name string
}

// Condition is a branch: the step runs only when the artifact Ref names,
// decoded, equals Value (JSON).
type Condition struct {
	Ref   ValueRef
	Value string
}

// FansOut reports whether the step runs once per item, of a static list or
// of one found at run time.
func (s *Step) FansOut() bool { return s.Foreach != nil || s.ForeachOf != nil }

// Dynamic reports whether what the step runs depends on a value an earlier
// step puts: a fan-out over it, or a branch on it.
func (s *Step) Dynamic() bool { return s.ForeachOf != nil || s.When != nil }

// Published returns the names of the values of the step called step that a
// step of f reads through ForeachOf or When, sorted and without repeats: what
// the step publishes in EnvValues.
func (f *Flow) Published(step string) []string {
	var names []string
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.ForeachOf != nil && s.ForeachOf.Step == step {
			names = append(names, s.ForeachOf.Name)
		}
		if s.When != nil && s.When.Ref.Step == step {
			names = append(names, s.When.Ref.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// ValuesPath is where a target that mounts a directory for EnvValues mounts it.
const ValuesPath = "/manifold/values"

// Dynamic returns the first step of f that is dynamic (Step.Dynamic), or nil.
func (f *Flow) Dynamic() *Step {
	for i := range f.Steps {
		if f.Steps[i].Dynamic() {
			return &f.Steps[i]
		}
	}
	return nil
}
