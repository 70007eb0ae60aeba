// Package sdk is what a flow program imports: a flow, its steps, and the options
// that say what each step runs, in which order, and what it needs.
//
// A flow program declares its flow and hands it to cli.Main, which gives the
// program its commands (compile, validate, run, check...):
//
//	package main
//
//	import (
//		"fmt"
//		"time"
//
//		"github.com/manifoldflow/manifold/cli"
//		"github.com/manifoldflow/manifold/sdk"
//	)
//
//	var flow = sdk.NewFlow("neuron-train",
//		sdk.Image("registry.example.com/ml/neuron-train:v1"), // this program, built into an image
//		sdk.Param("epochs", "3"),
//	).
//		Step("prepare", sdk.Run(prepare), sdk.CPU("4"), sdk.Memory("16Gi")).
//		Step("train", sdk.After("prepare"),
//			sdk.Image("public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.29.1-ubuntu24.04"),
//			sdk.Command("torchrun", "--nproc_per_node=32", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
//			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring(),
//			sdk.Nodes(2), sdk.Retry(2), sdk.Timeout(6*time.Hour)).
//		Step("evaluate", sdk.Run(evaluate), sdk.After("train"),
//			sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1))
//
//	func prepare(ctx *sdk.Context) error {
//		fmt.Println("preparing for", ctx.Param("epochs"), "epochs")
//		return ctx.Put("shards", []string{"shard-000", "shard-001"})
//	}
//
//	func evaluate(ctx *sdk.Context) error {
//		var shards []string
//		if err := ctx.Get("prepare", "shards", &shards); err != nil {
//			return err
//		}
//		fmt.Println("evaluated on", len(shards), "shards")
//		return nil
//	}
//
//	func main() { cli.Main(flow) }
//
// Then `go run . validate` checks it, `go run . run` runs it on this machine, and
// `go run . compile --target argo --artifacts s3://bucket/prefix` writes it for
// Argo Workflows (or job, jobset, airflow), with the artifact store through which
// its steps pass data on a cluster (without one, compile and validate warn that
// prepare's Put and evaluate's Get cannot work there).
//
// Options are values applied in order; the last one of a kind wins, and options
// that add to a list (After, Env, Toleration, Label, Volume…) accumulate. A step
// option given to NewFlow is the default for every step of that flow; a step's own
// option replaces it, and Trainium(0), Inferentia(0) and EFA(0) take a default's
// devices away. Options never validate: the compile package checks the whole flow
// at once and reports every error with its path.
package sdk

import "time"

// Flow is a named set of steps. Build one with NewFlow and Step; a Flow is not
// validated until it is compiled.
type Flow struct {
	spec FlowSpec
}

// NewFlow starts a flow called name. Flow options (Param, Schedule) configure the
// flow; step options given here are the defaults of every step.
func NewFlow(name string, opts ...FlowOption) *Flow {
	f := &Flow{spec: FlowSpec{Name: name}}
	for _, o := range opts {
		if o != nil {
			o.applyFlow(&f.spec)
		}
	}
	return f
}

// Step adds a step called name with its options and returns the flow, so that steps
// chain. Steps keep the order in which they are added.
func (f *Flow) Step(name string, opts ...StepOption) *Flow {
	s := StepSpec{}
	s.Apply(opts...)
	f.spec.Steps = append(f.spec.Steps, StepDecl{Name: name, Spec: s})
	return f
}

// Name returns the flow's name as declared.
func (f *Flow) Name() string { return f.spec.Name }

// Spec returns the flow as its options declared it: every option applied in order,
// nothing defaulted or checked. The result is a deep copy; changing it does not
// change the flow.
func (f *Flow) Spec() FlowSpec { return f.spec.clone() }

// FlowSpec is a flow as declared. The compile package turns it into a plan.
type FlowSpec struct {
	Name     string
	Params   []ParamSpec
	Schedule *string
	// ArtifactVolume is the ReadWriteMany PersistentVolumeClaim that keeps the
	// flow's artifacts on a cluster (ArtifactVolume); nil when not given.
	ArtifactVolume *string
	// Defaults holds the step options given to the flow itself.
	Defaults StepSpec
	Steps    []StepDecl
}

// ParamSpec is a flow parameter and its default value.
type ParamSpec struct {
	Name    string
	Default string
}

// StepDecl is one declared step: its name and its options.
type StepDecl struct {
	Name string
	Spec StepSpec
}

// StepSpec holds what a step's options set. A nil pointer or slice means the option
// was not given.
type StepSpec struct {
	Run     func(*Context) error
	Command []string
	After   []string
	// Foreach is nil when the option was not given and empty when it was given with
	// no items.
	Foreach []string
	// ForeachOf is set by sdk.ForeachOf: the step fans out over a list that an
	// earlier step put at run time.
	ForeachOf *ValueRef
	// When is set by sdk.When: the step runs only when a value an earlier
	// step put matches.
	When *Condition

	CPU          *string
	Memory       *string
	Disk         *string
	SharedMemory *string
	GPU          *int
	GPUVendor    *string
	Trainium     *int
	Inferentia   *int
	EFA          *int
	// EFAAll asks for every EFA interface of the instance type; EFA(n) and EFAAll()
	// replace each other, the last one winning.
	EFAAll       bool
	EFAWiring    *bool
	EFAArch      *string
	Resources    []ResourceSpec
	InstanceType *string

	NodeSelector []KeyValue
	Tolerations  []TolerationSpec
	// Zone is "same" (SameZone) or "any" (AnyZone); nil leaves it to the step's
	// EFA.
	Zone   *string
	Spread *string
	// Queue, Priority and Topology are Kueue's: the LocalQueue, the
	// WorkloadPriorityClass (and PriorityClass), and the required topology level.
	Queue    *string
	Priority *string
	Topology *string

	Image            *string
	ImagePullPolicy  *string
	ImagePullSecrets []string
	// Env holds plain and secret-backed variables in the order they were declared.
	Env            []EnvSpec
	Secrets        []string
	Labels         []KeyValue
	Annotations    []KeyValue
	ServiceAccount *string
	Namespace      *string
	Volumes        []VolumeSpec
	Port           *int
	Nodes          *int
	RunAsUser      *int64
	RunAsNonRoot   *bool
	// HostNetwork, when true, runs the step's pods in their node's network
	// namespace (sdk.HostNetwork).
	HostNetwork *bool

	Retry        *int
	RetryBackoff *time.Duration
	Timeout      *time.Duration

	// DRA, when true, claims the step's Neuron, EFA and GPU devices through a
	// generated ResourceClaimTemplate (sdk.DRA).
	DRA *bool
	// Claims name installed ResourceClaimTemplates the step's pods claim from
	// (sdk.Claim), in the order given.
	Claims []string
	// NoArtifacts, when true, says the step's code neither puts nor gets
	// artifacts (sdk.NoArtifacts).
	NoArtifacts *bool
}

// Apply applies opts to s in order.
func (s *StepSpec) Apply(opts ...StepOption) {
	for _, o := range opts {
		if o != nil {
			o.applyStep(s)
		}
	}
}

// KeyValue is one entry of a label, annotation or node selector option.
type KeyValue struct {
	Key, Value string
}

// ResourceSpec is an extended resource request made with Resource.
type ResourceSpec struct {
	Name  string
	Count int64
}

// TolerationSpec is a toleration made with Toleration or read from manifold.toml.
type TolerationSpec struct {
	Key, Operator, Value, Effect string
}

// EnvSpec is an environment variable: a plain value, or a key of a Secret when
// SecretName is set.
type EnvSpec struct {
	Name       string
	Value      string
	SecretName string
	SecretKey  string
}

// VolumeSpec mounts a PersistentVolumeClaim at Path.
type VolumeSpec struct {
	Claim string
	Path  string
}

func (f FlowSpec) clone() FlowSpec {
	c := f
	c.Params = cloneSlice(f.Params)
	c.Schedule = clonePtr(f.Schedule)
	c.ArtifactVolume = clonePtr(f.ArtifactVolume)
	c.Defaults = f.Defaults.clone()
	c.Steps = make([]StepDecl, len(f.Steps))
	for i, s := range f.Steps {
		c.Steps[i] = StepDecl{Name: s.Name, Spec: s.Spec.clone()}
	}
	return c
}

func (s StepSpec) clone() StepSpec {
	c := s
	c.Command = cloneSlice(s.Command)
	c.After = cloneSlice(s.After)
	c.Foreach = cloneSlice(s.Foreach)
	c.ForeachOf = clonePtr(s.ForeachOf)
	c.When = clonePtr(s.When)
	c.CPU = clonePtr(s.CPU)
	c.Memory = clonePtr(s.Memory)
	c.Disk = clonePtr(s.Disk)
	c.SharedMemory = clonePtr(s.SharedMemory)
	c.GPU = clonePtr(s.GPU)
	c.GPUVendor = clonePtr(s.GPUVendor)
	c.Trainium = clonePtr(s.Trainium)
	c.Inferentia = clonePtr(s.Inferentia)
	c.EFA = clonePtr(s.EFA)
	c.EFAWiring = clonePtr(s.EFAWiring)
	c.EFAArch = clonePtr(s.EFAArch)
	c.Resources = cloneSlice(s.Resources)
	c.InstanceType = clonePtr(s.InstanceType)
	c.NodeSelector = cloneSlice(s.NodeSelector)
	c.Tolerations = cloneSlice(s.Tolerations)
	c.Zone = clonePtr(s.Zone)
	c.Spread = clonePtr(s.Spread)
	c.Queue = clonePtr(s.Queue)
	c.Priority = clonePtr(s.Priority)
	c.Topology = clonePtr(s.Topology)
	c.Image = clonePtr(s.Image)
	c.ImagePullPolicy = clonePtr(s.ImagePullPolicy)
	c.ImagePullSecrets = cloneSlice(s.ImagePullSecrets)
	c.Env = cloneSlice(s.Env)
	c.Secrets = cloneSlice(s.Secrets)
	c.Labels = cloneSlice(s.Labels)
	c.Annotations = cloneSlice(s.Annotations)
	c.ServiceAccount = clonePtr(s.ServiceAccount)
	c.Namespace = clonePtr(s.Namespace)
	c.Volumes = cloneSlice(s.Volumes)
	c.Port = clonePtr(s.Port)
	c.Nodes = clonePtr(s.Nodes)
	c.RunAsUser = clonePtr(s.RunAsUser)
	c.RunAsNonRoot = clonePtr(s.RunAsNonRoot)
	c.HostNetwork = clonePtr(s.HostNetwork)
	c.NoArtifacts = clonePtr(s.NoArtifacts)
	c.Retry = clonePtr(s.Retry)
	c.RetryBackoff = clonePtr(s.RetryBackoff)
	c.Timeout = clonePtr(s.Timeout)
	c.DRA = clonePtr(s.DRA)
	c.Claims = cloneSlice(s.Claims)
	return c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// cloneSlice copies s, keeping nil apart from empty.
func cloneSlice[T any](s []T) []T {
	if s == nil {
		return nil
	}
	return append(make([]T, 0, len(s)), s...)
}
