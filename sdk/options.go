package sdk

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// StepOption configures a step. Only this package defines step options.
type StepOption interface {
	applyStep(*StepSpec)
}

// FlowOption configures a flow. Step options that are also flow options set the
// default of every step of the flow.
type FlowOption interface {
	applyFlow(*FlowSpec)
}

// Option is valid on a step and on a flow, where it is the flow's default.
type Option interface {
	StepOption
	FlowOption
}

// Compile-time checks that options implement the levels they document.
var (
	_ Option     = cpu("")
	_ Option     = trainium(0)
	_ Option     = efaAll{}
	_ Option     = efaWiring{}
	_ Option     = zone("")
	_ Option     = spread("")
	_ Option     = queue("")
	_ Option     = priority("")
	_ Option     = topology("")
	_ StepOption = run{}
	_ StepOption = command{}
	_ FlowOption = param{}
	_ FlowOption = schedule("")
	_ FlowOption = artifactVolume("")
)

// Body.

// Run makes the step execute fn, inside the flow's own binary (`<flow> step NAME`).
// The step's image must contain the flow program.
func Run(fn func(*Context) error) StepOption { return run{fn} }

type run struct{ fn func(*Context) error }

func (o run) applyStep(s *StepSpec) { s.Run = o.fn }
func (o run) String() string        { return "Run(func)" }

// Command makes the step run argv in its image. Kubernetes expands $(VAR) in argv
// from the step's environment, so $(MANIFOLD_PARAM_EPOCHS) reads a flow param.
// A shell's script (sh -c SCRIPT) reads the variable instead,
// "$MANIFOLD_PARAM_EPOCHS": $(VAR) is expanded into the script's text before
// the shell parses it, so a value holding a quote or a ; would run as commands.
func Command(argv ...string) StepOption { return command(append([]string(nil), argv...)) }

type command []string

func (o command) applyStep(s *StepSpec) { s.Command = append([]string{}, o...) }
func (o command) String() string        { return fmt.Sprintf("Command(%q)", []string(o)) }

// Order.

// After makes the step start once the named steps have succeeded. Repeated After
// options add to the list.
func After(steps ...string) StepOption { return after(append([]string(nil), steps...)) }

type after []string

func (o after) applyStep(s *StepSpec) { s.After = append(s.After, o...) }
func (o after) String() string        { return fmt.Sprintf("After(%q)", []string(o)) }

// Foreach runs the step once per item; each run sees its item as MANIFOLD_ITEM and
// its zero-based index as MANIFOLD_INDEX. Steps after it wait for every item.
func Foreach(items ...string) StepOption { return foreach(append([]string{}, items...)) }

type foreach []string

func (o foreach) applyStep(s *StepSpec) { s.Foreach, s.ForeachOf = append([]string{}, o...), nil }
func (o foreach) String() string        { return fmt.Sprintf("Foreach(%q)", []string(o)) }

// ValueRef names a value an earlier step put: its artifact Name, put by Step
// (with Context.Put, or written as $MANIFOLD_ARTIFACTS/<Name>.json by a Command
// step).
type ValueRef struct {
	Step, Name string
}

// ForeachOf runs the step once per element of the JSON list that step put as
// its artifact name, as the run finds it: a Run step's ctx.Put(name, list), or
// a Command step's $MANIFOLD_ARTIFACTS/<name>.json. The step waits for step
// (as After(step) says). Each run sees its element (any JSON value) through
// Context.Item and Context.ItemValue, its index through Context.Index and the
// count through Context.Count; a Command step gets them as MANIFOLD_ITEM (a
// string element's text, any other element as JSON), MANIFOLD_INDEX and
// MANIFOLD_COUNT. An empty list runs no item, and the steps after it run as
// after any other step that succeeded. The producing step runs once: a
// fan-out over what each item of a foreach put (nested fan-out) is refused.
func ForeachOf(step, name string) StepOption { return foreachOf{Step: step, Name: name} }

type foreachOf ValueRef

func (o foreachOf) applyStep(s *StepSpec) {
	s.ForeachOf = &ValueRef{Step: o.Step, Name: o.Name}
	s.Foreach = nil
}
func (o foreachOf) String() string { return fmt.Sprintf("ForeachOf(%q, %q)", o.Step, o.Name) }

// Condition is what sdk.When gives: the step runs only when the artifact Name of
// Step, decoded, equals Value.
type Condition struct {
	ValueRef
	// Value is the JSON encoding of the value the artifact must equal.
	Value string
}

// When makes the step run only when the artifact name that step put equals
// value (compared as JSON: "big" matches the string "big", 3 the number 3).
// The step waits for step (as After(step) says). A step that does not run is
// skipped as not taken, with the value that was found, and so are the steps
// that wait only for steps not taken; a step that waits for several (a join
// after a branch) runs once the branch taken has succeeded. value must be a
// string, number, bool or nil.
func When(step, name string, value any) StepOption {
	// A value that has no JSON encoding leaves Value empty, which the
	// compiler refuses, naming the step.
	data, _ := json.Marshal(value)
	return when{ValueRef: ValueRef{Step: step, Name: name}, Value: string(data)}
}

type when Condition

func (o when) applyStep(s *StepSpec) { c := Condition(o); s.When = &c }
func (o when) String() string {
	return fmt.Sprintf("When(%q, %q, %s)", o.Step, o.Name, o.Value)
}

// Resources.

// CPU requests q of CPU, as a Kubernetes quantity ("4", "500m").
func CPU(q string) Option { return cpu(q) }

type cpu string

func (o cpu) applyStep(s *StepSpec) { s.CPU = new(string(o)) }
func (o cpu) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o cpu) String() string        { return fmt.Sprintf("CPU(%q)", string(o)) }

// Memory requests and limits q of memory ("16Gi").
func Memory(q string) Option { return memory(q) }

type memory string

func (o memory) applyStep(s *StepSpec) { s.Memory = new(string(o)) }
func (o memory) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o memory) String() string        { return fmt.Sprintf("Memory(%q)", string(o)) }

// Disk requests q of ephemeral storage ("100Gi").
func Disk(q string) Option { return disk(q) }

type disk string

func (o disk) applyStep(s *StepSpec) { s.Disk = new(string(o)) }
func (o disk) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o disk) String() string        { return fmt.Sprintf("Disk(%q)", string(o)) }

// SharedMemory mounts a memory-backed /dev/shm of size q ("64Gi"), which PyTorch data
// loaders and collective libraries need beyond the container default of 64Mi.
func SharedMemory(q string) Option { return sharedMemory(q) }

type sharedMemory string

func (o sharedMemory) applyStep(s *StepSpec) { s.SharedMemory = new(string(o)) }
func (o sharedMemory) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o sharedMemory) String() string        { return fmt.Sprintf("SharedMemory(%q)", string(o)) }

// GPU requests n GPUs of the step's vendor (nvidia unless GPUVendor says otherwise).
// GPU(0) means no GPU.
func GPU(n int) Option { return gpu(n) }

type gpu int

func (o gpu) applyStep(s *StepSpec) { s.GPU = new(int(o)) }
func (o gpu) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o gpu) String() string        { return fmt.Sprintf("GPU(%d)", int(o)) }

// GPUVendor chooses the GPU resource: "nvidia" (nvidia.com/gpu) or "amd" (amd.com/gpu).
func GPUVendor(vendor string) Option { return gpuVendor(vendor) }

type gpuVendor string

func (o gpuVendor) applyStep(s *StepSpec) { s.GPUVendor = new(string(o)) }
func (o gpuVendor) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o gpuVendor) String() string        { return fmt.Sprintf("GPUVendor(%q)", string(o)) }

// Trainium requests n whole Neuron devices (aws.amazon.com/neuron) and tolerates the
// aws.amazon.com/neuron taint. Trainium(0) on a step takes away a count that the
// flow gives as its default (or, through --set, that the step's code asks): the
// step then asks no Neuron devices. Where there is no such count, 0 is an error.
func Trainium(n int) Option { return trainium(n) }

type trainium int

func (o trainium) applyStep(s *StepSpec) { s.Trainium = new(int(o)) }
func (o trainium) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o trainium) String() string        { return fmt.Sprintf("Trainium(%d)", int(o)) }

// Inferentia requests n Inferentia devices. It is another name for Trainium: both are
// Neuron devices (aws.amazon.com/neuron); a step gives one or the other, and either
// replaces the other given as the flow's default or in the step's code (--set).
// Inferentia(0) takes a default's devices away, as Trainium(0) does.
func Inferentia(n int) Option { return inferentia(n) }

type inferentia int

func (o inferentia) applyStep(s *StepSpec) { s.Inferentia = new(int(o)) }
func (o inferentia) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o inferentia) String() string        { return fmt.Sprintf("Inferentia(%d)", int(o)) }

// EFA requests n Elastic Fabric Adapter interfaces (vpc.amazonaws.com/efa). EFA(0)
// takes away a count (or EFAAll) that the flow gives as its default, or that the
// step's code asks under --set; with it goes the wiring that EFAWiring on a lower
// layer adds. Where there is no such count, 0 is an error.
func EFA(n int) Option { return efa(n) }

type efa int

func (o efa) applyStep(s *StepSpec) { s.EFA, s.EFAAll = new(int(o)), false }
func (o efa) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o efa) String() string        { return fmt.Sprintf("EFA(%d)", int(o)) }

// EFAAll requests every EFA interface the step's instance type has, from the
// instance catalog; it needs InstanceType.
func EFAAll() Option { return efaAll{} }

type efaAll struct{}

func (o efaAll) applyStep(s *StepSpec) { s.EFA, s.EFAAll = nil, true }
func (o efaAll) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o efaAll) String() string        { return "EFAAll()" }

// EFAWiring adds what an image needs to use the step's EFA interfaces instead of
// falling back to TCP: libfabric's and NCCL's variables (FI_PROVIDER=efa,
// FI_EFA_USE_DEVICE_RDMA=1, FI_EFA_FORK_SAFE=1, NCCL_SOCKET_IFNAME,
// NCCL_IGNORE_DISABLED_P2P; with Trainium or Inferentia also the Neuron
// runtime's CCOM_SOCKET_IFNAME and FI_EFA_ENABLE_SHM_TRANSFER), LD_LIBRARY_PATH
// and PATH with the EFA installer's directories (for the architecture EFAArch
// names), the IPC_LOCK capability and a memory-backed /dev/shm. A variable the
// step sets itself keeps its own value. The image must hold libfabric and, for
// NCCL, aws-ofi-nccl (or the Neuron runtime).
//
// On a step it needs EFA or EFAAll. On a flow (or efa_wiring = true in
// manifold.toml) it wires every step that asks for EFA and leaves the others be.
func EFAWiring() Option { return efaWiring{} }

type efaWiring struct{}

func (o efaWiring) applyStep(s *StepSpec) { s.EFAWiring = new(true) }
func (o efaWiring) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o efaWiring) String() string        { return "EFAWiring()" }

// EFAArch names the architecture of the step's image, whose EFA library
// directories EFAWiring puts on LD_LIBRARY_PATH: "x86_64" (the default; also
// "amd64") or "aarch64" (also "arm64").
func EFAArch(arch string) Option { return efaArch(arch) }

type efaArch string

func (o efaArch) applyStep(s *StepSpec) { s.EFAArch = new(string(o)) }
func (o efaArch) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o efaArch) String() string        { return fmt.Sprintf("EFAArch(%q)", string(o)) }

// Resource requests n of any extended resource (a domain-prefixed name such as
// "example.com/fpga"), as both request and limit. A later Resource of the same name
// replaces the earlier one. Resource of aws.amazon.com/neuron or
// vpc.amazonaws.com/efa is another way to write Trainium or EFA, and 0 takes a
// default away as they do.
func Resource(name string, n int64) Option { return resourceOpt{name, n} }

type resourceOpt struct {
	name string
	n    int64
}

func (o resourceOpt) applyStep(s *StepSpec) {
	s.Resources = upsert(s.Resources, ResourceSpec{Name: o.name, Count: o.n}, resourceKey)
}
func (o resourceOpt) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o resourceOpt) String() string        { return fmt.Sprintf("Resource(%q, %d)", o.name, o.n) }

// InstanceType pins the step to nodes of EC2 instance type t
// (node.kubernetes.io/instance-type) and checks its requests against what t has.
// Any EC2 instance type is accepted, such as m7i.8xlarge for a CPU step; the
// compiler refuses a name that is no instance type, with the nearest real ones,
// and accelerators that t cannot hold (Trainium on m7i.8xlarge), with the types
// that hold them. Package catalog lists the types and the figures it checks.
func InstanceType(t string) Option { return instanceType(t) }

type instanceType string

func (o instanceType) applyStep(s *StepSpec) { s.InstanceType = new(string(o)) }
func (o instanceType) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o instanceType) String() string        { return fmt.Sprintf("InstanceType(%q)", string(o)) }

// Placement.

// NodeSelector adds a node selector term; a later one for the same key replaces it.
func NodeSelector(key, value string) Option { return nodeSelector{key, value} }

type nodeSelector KeyValue

func (o nodeSelector) applyStep(s *StepSpec) {
	s.NodeSelector = upsert(s.NodeSelector, KeyValue(o), kvKey)
}
func (o nodeSelector) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o nodeSelector) String() string {
	return fmt.Sprintf("NodeSelector(%q, %q)", o.Key, o.Value)
}

// Toleration tolerates the taint key=value:effect. An empty value tolerates the key
// with any value (operator Exists); an empty effect tolerates every effect; an empty
// key with an empty value tolerates every taint.
func Toleration(key, value, effect string) Option {
	op := "Equal"
	if value == "" {
		op = "Exists"
	}
	return toleration{key, op, value, effect}
}

type toleration TolerationSpec

func (o toleration) applyStep(s *StepSpec) {
	s.Tolerations = append(s.Tolerations, TolerationSpec(o))
}
func (o toleration) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o toleration) String() string {
	return fmt.Sprintf("Toleration(%q, %q, %q)", o.Key, o.Value, o.Effect)
}

// SameZone keeps all the pods of a multi-node step in one availability zone
// (topology.kubernetes.io/zone). A step that asks for EFA gets it without asking:
// EFA traffic does not leave a zone.
func SameZone() Option { return zone(zoneSame) }

// AnyZone lets the pods of a multi-node step land in any zones, even when it asks
// for EFA (which then cannot connect them across zones).
func AnyZone() Option { return zone(zoneAny) }

// The values of StepSpec.Zone.
const (
	zoneSame = "same"
	zoneAny  = "any"
)

type zone string

func (o zone) applyStep(s *StepSpec) { s.Zone = new(string(o)) }
func (o zone) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o zone) String() string {
	if o == zoneAny {
		return "AnyZone()"
	}
	return "SameZone()"
}

// Spread puts each pod of a multi-node step on a node of its own value of the
// node label key: "topology.k8s.aws/network-node-layer-3" for distinct network
// blocks, say. Without it the pods go one per node (kubernetes.io/hostname).
func Spread(key string) Option { return spread(key) }

type spread string

func (o spread) applyStep(s *StepSpec) { s.Spread = new(string(o)) }
func (o spread) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o spread) String() string        { return fmt.Sprintf("Spread(%q)", string(o)) }

// Queueing, by Kueue.

// Queue submits the step to Kueue's LocalQueue name in the step's namespace:
// Kueue admits it (all its pods at once, for a multi-node step) when its
// ClusterQueue has quota. manifold.toml's queue sets the default.
func Queue(name string) Option { return queue(name) }

type queue string

func (o queue) applyStep(s *StepSpec) { s.Queue = new(string(o)) }
func (o queue) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o queue) String() string        { return fmt.Sprintf("Queue(%q)", string(o)) }

// Priority gives the step's pods the PriorityClass class and, with a Queue,
// its Kueue workload the WorkloadPriorityClass of the same name: the cluster
// needs both.
func Priority(class string) Option { return priority(class) }

type priority string

func (o priority) applyStep(s *StepSpec) { s.Priority = new(string(o)) }
func (o priority) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o priority) String() string        { return fmt.Sprintf("Priority(%q)", string(o)) }

// Topology asks Kueue's topology-aware scheduling to admit all the pods of a
// queued step within one domain of the node label level, such as
// "cloud.provider.com/topology-block". It needs a Queue whose ClusterQueue
// uses a topology-aware ResourceFlavor.
func Topology(level string) Option { return topology(level) }

type topology string

func (o topology) applyStep(s *StepSpec) { s.Topology = new(string(o)) }
func (o topology) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o topology) String() string        { return fmt.Sprintf("Topology(%q)", string(o)) }

// Pod.

// Image sets the step's container image. On a flow it is the image of every step;
// Run steps need an image that contains the flow program.
func Image(ref string) Option { return image(ref) }

type image string

func (o image) applyStep(s *StepSpec) { s.Image = new(string(o)) }
func (o image) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o image) String() string        { return fmt.Sprintf("Image(%q)", string(o)) }

// ImagePullPolicy sets when the image is pulled: "Always", "IfNotPresent" or "Never".
func ImagePullPolicy(policy string) Option { return imagePullPolicy(policy) }

type imagePullPolicy string

func (o imagePullPolicy) applyStep(s *StepSpec) { s.ImagePullPolicy = new(string(o)) }
func (o imagePullPolicy) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o imagePullPolicy) String() string {
	return fmt.Sprintf("ImagePullPolicy(%q)", string(o))
}

// ImagePullSecret adds the named Secret to the pod's image pull secrets.
func ImagePullSecret(name string) Option { return imagePullSecret(name) }

type imagePullSecret string

func (o imagePullSecret) applyStep(s *StepSpec) {
	s.ImagePullSecrets = append(s.ImagePullSecrets, string(o))
}
func (o imagePullSecret) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o imagePullSecret) String() string {
	return fmt.Sprintf("ImagePullSecret(%q)", string(o))
}

// Env sets an environment variable. Variables keep the order of their first
// declaration; a later one of the same name replaces the value. The value is
// written into every target's files: give a credential with SecretEnv or Secret
// instead (compile warns of a value that looks like one).
func Env(name, value string) Option { return env{Name: name, Value: value} }

// SecretEnv sets the environment variable name from key of the Secret secret.
// Emitted files name the Secret and the key, never a value; a run on this
// machine takes the value this environment has under name, and masks it in
// what it writes.
func SecretEnv(name, secret, key string) Option {
	return env{Name: name, SecretName: secret, SecretKey: key}
}

type env EnvSpec

func (o env) applyStep(s *StepSpec) { s.Env = upsert(s.Env, EnvSpec(o), envKey) }
func (o env) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o env) String() string {
	if o.SecretName != "" {
		return fmt.Sprintf("SecretEnv(%q, %q, %q)", o.Name, o.SecretName, o.SecretKey)
	}
	return fmt.Sprintf("Env(%q, %q)", o.Name, o.Value)
}

// Secret exposes every key of the named Secret as environment variables (envFrom).
func Secret(name string) Option { return secret(name) }

type secret string

func (o secret) applyStep(s *StepSpec) { s.Secrets = append(s.Secrets, string(o)) }
func (o secret) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o secret) String() string        { return fmt.Sprintf("Secret(%q)", string(o)) }

// Label adds a label to the step's pods (and the objects that run them).
func Label(key, value string) Option { return label{key, value} }

type label KeyValue

func (o label) applyStep(s *StepSpec) { s.Labels = upsert(s.Labels, KeyValue(o), kvKey) }
func (o label) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o label) String() string        { return fmt.Sprintf("Label(%q, %q)", o.Key, o.Value) }

// Annotation adds an annotation to the step's pods.
func Annotation(key, value string) Option { return annotation{key, value} }

type annotation KeyValue

func (o annotation) applyStep(s *StepSpec) {
	s.Annotations = upsert(s.Annotations, KeyValue(o), kvKey)
}
func (o annotation) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o annotation) String() string {
	return fmt.Sprintf("Annotation(%q, %q)", o.Key, o.Value)
}

// ServiceAccount runs the step's pods as the named service account.
func ServiceAccount(name string) Option { return serviceAccount(name) }

type serviceAccount string

func (o serviceAccount) applyStep(s *StepSpec) { s.ServiceAccount = new(string(o)) }
func (o serviceAccount) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o serviceAccount) String() string {
	return fmt.Sprintf("ServiceAccount(%q)", string(o))
}

// Namespace puts the step's objects in the named namespace.
func Namespace(name string) Option { return namespace(name) }

type namespace string

func (o namespace) applyStep(s *StepSpec) { s.Namespace = new(string(o)) }
func (o namespace) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o namespace) String() string        { return fmt.Sprintf("Namespace(%q)", string(o)) }

// Volume mounts the PersistentVolumeClaim claim at path.
func Volume(claim, path string) Option { return volume{claim, path} }

type volume VolumeSpec

func (o volume) applyStep(s *StepSpec) { s.Volumes = append(s.Volumes, VolumeSpec(o)) }
func (o volume) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o volume) String() string        { return fmt.Sprintf("Volume(%q, %q)", o.Claim, o.Path) }

// Port sets the TCP port the step listens on. A multi-node step's nodes rendezvous
// on it (MASTER_PORT); without it they use 29500, torchrun's default.
func Port(n int) Option { return port(n) }

type port int

func (o port) applyStep(s *StepSpec) { s.Port = new(int(o)) }
func (o port) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o port) String() string        { return fmt.Sprintf("Port(%d)", int(o)) }

// Nodes runs the step on n nodes at once, each with the step's whole pod: its
// Trainium, GPU and EFA counts are per node. Every node finds the others through the
// rendezvous variables (MANIFOLD_NODE_RANK, MANIFOLD_NUM_NODES, MASTER_ADDR,
// MASTER_PORT and torchrun's PET_* twins). Nodes(1), the default, is one pod.
func Nodes(n int) Option { return nodes(n) }

type nodes int

func (o nodes) applyStep(s *StepSpec) { s.Nodes = new(int(o)) }
func (o nodes) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o nodes) String() string        { return fmt.Sprintf("Nodes(%d)", int(o)) }

// RunAsUser runs the step's containers as user id uid. A non-zero uid also
// sets runAsNonRoot, which Pod Security's restricted level asks of every pod: a
// step on an image that runs as root (busybox, most Deep Learning Containers)
// meets that level with it. 0 runs the step as root.
func RunAsUser(uid int64) Option { return runAsUser(uid) }

type runAsUser int64

func (o runAsUser) applyStep(s *StepSpec) { s.RunAsUser = new(int64(o)) }
func (o runAsUser) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o runAsUser) String() string        { return fmt.Sprintf("RunAsUser(%d)", int64(o)) }

// RunAsNonRoot makes the kubelet refuse to start the step's containers as root.
// Manifold sets it itself for a non-zero RunAsUser and for Run steps on the flow's
// own image built on the default base; RunAsNonRoot(true) says so of another
// image that runs as a non-root user, RunAsNonRoot(false) lets a step run as root.
func RunAsNonRoot(v bool) Option { return runAsNonRoot(v) }

type runAsNonRoot bool

func (o runAsNonRoot) applyStep(s *StepSpec) { s.RunAsNonRoot = new(bool(o)) }
func (o runAsNonRoot) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o runAsNonRoot) String() string        { return fmt.Sprintf("RunAsNonRoot(%t)", bool(o)) }

// HostNetwork runs the step's pods in their node's network namespace, with the
// cluster's DNS still first (dnsPolicy ClusterFirstWithHostNet): for a step that
// must reach what only the node reaches, or that wants the node's own network
// devices. Pods of the step then share the node's ports: two on one node cannot
// listen on the same Port.
func HostNetwork(v bool) Option { return hostNetwork(v) }

type hostNetwork bool

func (o hostNetwork) applyStep(s *StepSpec) { s.HostNetwork = new(bool(o)) }
func (o hostNetwork) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o hostNetwork) String() string        { return fmt.Sprintf("HostNetwork(%t)", bool(o)) }

// Failure.

// Retry retries a failed step up to n more times. Without it a step is not retried.
func Retry(n int) Option { return retry(n) }

type retry int

func (o retry) applyStep(s *StepSpec) { s.Retry = new(int(o)) }
func (o retry) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o retry) String() string        { return fmt.Sprintf("Retry(%d)", int(o)) }

// RetryBackoff waits d before the first retry, doubling for each later one, on the
// targets that let a flow choose (Argo, Airflow, local). Kubernetes Jobs use their
// own backoff.
func RetryBackoff(d time.Duration) Option { return retryBackoff(d) }

type retryBackoff time.Duration

func (o retryBackoff) applyStep(s *StepSpec) { s.RetryBackoff = new(time.Duration(o)) }
func (o retryBackoff) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o retryBackoff) String() string {
	return fmt.Sprintf("RetryBackoff(%s)", time.Duration(o))
}

// Timeout fails an attempt of the step that runs longer than d.
func Timeout(d time.Duration) Option { return timeout(d) }

type timeout time.Duration

func (o timeout) applyStep(s *StepSpec) { s.Timeout = new(time.Duration(o)) }
func (o timeout) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o timeout) String() string        { return fmt.Sprintf("Timeout(%s)", time.Duration(o)) }

// Flow only.

// Param declares a flow parameter with its default. Every step sees it as
// MANIFOLD_PARAM_<NAME> (upper-cased, - as _) and Run bodies as ctx.Param(name).
func Param(name, def string) FlowOption { return param{name, def} }

type param ParamSpec

func (o param) applyFlow(f *FlowSpec) {
	f.Params = upsert(f.Params, ParamSpec(o), func(p ParamSpec) string { return p.Name })
}
func (o param) String() string { return fmt.Sprintf("Param(%q, %q)", o.Name, o.Default) }

// Schedule runs the flow on a cron schedule ("0 3 * * *", or "@daily").
func Schedule(cron string) FlowOption { return schedule(cron) }

type schedule string

func (o schedule) applyFlow(f *FlowSpec) { f.Schedule = new(strings.TrimSpace(string(o))) }
func (o schedule) String() string        { return fmt.Sprintf("Schedule(%q)", string(o)) }

// ArtifactVolume keeps the flow's artifacts on a cluster in the ReadWriteMany
// PersistentVolumeClaim claim, which every step's pod mounts at
// /manifold/artifacts: ctx.Put and ctx.Get, and a Command step's
// MANIFOLD_ARTIFACTS, reach the same files from every pod and node. It replaces
// the artifacts store of manifold.toml; --artifacts replaces it. Runs on this
// machine keep artifacts in the run directory.
func ArtifactVolume(claim string) FlowOption { return artifactVolume(claim) }

type artifactVolume string

func (o artifactVolume) applyFlow(f *FlowSpec) { f.ArtifactVolume = new(string(o)) }
func (o artifactVolume) String() string        { return fmt.Sprintf("ArtifactVolume(%q)", string(o)) }

// NoArtifacts says that the step's Go code (a Run step's) neither puts nor gets
// artifacts, so that it needs no artifact store on a cluster: compile and
// validate do not count it among the steps that keep or read artifacts when
// they warn of a flow without a store. Given to the flow, it says so of every
// step. It changes nothing else: on a cluster without a store, a Put or Get of
// the step still fails, saying how to give the flow a store.
func NoArtifacts() Option { return noArtifacts{} }

type noArtifacts struct{}

func (o noArtifacts) applyStep(s *StepSpec) { s.NoArtifacts = new(true) }
func (o noArtifacts) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o noArtifacts) String() string        { return "NoArtifacts()" }

// upsert replaces the element of list with v's key, or appends v.
func upsert[T any](list []T, v T, key func(T) string) []T {
	for i := range list {
		if key(list[i]) == key(v) {
			list[i] = v
			return list
		}
	}
	return append(list, v)
}

func kvKey(kv KeyValue) string          { return kv.Key }
func envKey(e EnvSpec) string           { return e.Name }
func resourceKey(r ResourceSpec) string { return r.Name }
