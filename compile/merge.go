package compile

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// A layer is one source of a step's settings: the command line's overrides (--set),
// the step itself, the flow's defaults, or manifold.toml. Each keeps its own path, so
// an error points where the value was written; an override has the step's path, as
// it sets the step's own options.
type layer struct {
	spec *sdk.StepSpec
	path *field.Path
	// name turns an option's field name into this layer's spelling of it.
	name func(string) string
}

func (l layer) child(name string) *field.Path { return l.path.Child(l.name(name)) }

// The ranks of the layers, highest first: merge takes them in this order.
const (
	overrideRank = iota
	stepRank
	flowRank
	configRank
)

// val is a merged scalar: its value, whether any layer set it, where, and the
// layer's rank (overrideRank, stepRank...; higher ranks are lower layers).
type val[T any] struct {
	v     T
	set   bool
	at    *field.Path
	layer int
}

// item is one merged list element, where it was written, and its layer's rank.
type item[T any] struct {
	v     T
	at    *field.Path
	layer int
}

// resolved is a step with its layers merged and nothing yet checked.
type resolved struct {
	name string
	at   *field.Path

	run       func(*sdk.Context) error
	command   []string
	after     []string
	foreach   []string
	foreachOf *sdk.ValueRef
	when      *sdk.Condition

	cpu, memory, disk, sharedMemory val[string]
	gpu                             val[int]
	gpuVendor                       val[string]
	efaWiring                       val[bool]
	efaArch                         val[string]
	// neuron and efaCount hold every layer's word on the step's Neuron devices
	// and EFA interfaces, highest layer first; resources leaves those two
	// resources out.
	neuron, efaCount []source
	resources        []item[sdk.ResourceSpec]
	instanceType     val[string]

	nodeSelector []item[sdk.KeyValue]
	tolerations  []item[sdk.TolerationSpec]
	zone, spread val[string]

	queue, priority, topologyLevel val[string]

	image, imagePullPolicy val[string]
	imagePullSecrets       []item[string]
	env                    []item[sdk.EnvSpec]
	secrets                []item[string]
	labels, annotations    []item[sdk.KeyValue]
	serviceAccount         val[string]
	namespace              val[string]
	volumes                []item[sdk.VolumeSpec]
	port                   val[int]
	nodes                  val[int]
	runAsUser              val[int64]
	runAsNonRoot           val[bool]
	hostNetwork            val[bool]
	noArtifacts            val[bool]

	retry        val[int]
	retryBackoff val[time.Duration]
	timeout      val[time.Duration]

	dra    val[bool]
	claims []item[string]
}

// merge resolves a step from its layers, highest first, one of each rank
// (override, step, flow, config). The body and order come from the step and its
// overrides alone, as if the overrides were applied to the step after its own
// options.
func merge(name string, at *field.Path, layers []layer) *resolved {
	override, step := layers[overrideRank].spec, layers[stepRank].spec
	r := &resolved{
		name:      name,
		at:        at,
		run:       step.Run,
		command:   step.Command,
		after:     append(slices.Clip(step.After), override.After...),
		foreach:   step.Foreach,
		foreachOf: step.ForeachOf,
		when:      step.When,

		cpu:          pick(layers, "cpu", func(s *sdk.StepSpec) *string { return s.CPU }),
		memory:       pick(layers, "memory", func(s *sdk.StepSpec) *string { return s.Memory }),
		disk:         pick(layers, "disk", func(s *sdk.StepSpec) *string { return s.Disk }),
		sharedMemory: pick(layers, "sharedMemory", func(s *sdk.StepSpec) *string { return s.SharedMemory }),
		gpu:          pick(layers, "gpu", func(s *sdk.StepSpec) *int { return s.GPU }),
		gpuVendor:    pick(layers, "gpuVendor", func(s *sdk.StepSpec) *string { return s.GPUVendor }),
		efaWiring:    pick(layers, "efaWiring", func(s *sdk.StepSpec) *bool { return s.EFAWiring }),
		efaArch:      pick(layers, "efaArch", func(s *sdk.StepSpec) *string { return s.EFAArch }),
		resources: slices.DeleteFunc(keyed(layers, "resources", func(s *sdk.StepSpec) []sdk.ResourceSpec { return s.Resources }, func(r sdk.ResourceSpec) string { return r.Name }),
			func(it item[sdk.ResourceSpec]) bool {
				return it.v.Name == plan.ResourceNeuron || it.v.Name == plan.ResourceEFA
			}),
		instanceType: pick(layers, "instanceType", func(s *sdk.StepSpec) *string { return s.InstanceType }),

		nodeSelector: keyed(layers, "nodeSelector", func(s *sdk.StepSpec) []sdk.KeyValue { return s.NodeSelector }, kvKey),
		tolerations:  concat(layers, "tolerations", func(s *sdk.StepSpec) []sdk.TolerationSpec { return s.Tolerations }),
		zone:         pick(layers, "zone", func(s *sdk.StepSpec) *string { return s.Zone }),
		spread:       pick(layers, "spread", func(s *sdk.StepSpec) *string { return s.Spread }),

		queue:         pick(layers, "queue", func(s *sdk.StepSpec) *string { return s.Queue }),
		priority:      pick(layers, "priority", func(s *sdk.StepSpec) *string { return s.Priority }),
		topologyLevel: pick(layers, "topology", func(s *sdk.StepSpec) *string { return s.Topology }),

		image:            pick(layers, "image", func(s *sdk.StepSpec) *string { return s.Image }),
		imagePullPolicy:  pick(layers, "imagePullPolicy", func(s *sdk.StepSpec) *string { return s.ImagePullPolicy }),
		imagePullSecrets: concat(layers, "imagePullSecrets", func(s *sdk.StepSpec) []string { return s.ImagePullSecrets }),
		env:              keyed(layers, "env", func(s *sdk.StepSpec) []sdk.EnvSpec { return s.Env }, func(e sdk.EnvSpec) string { return e.Name }),
		secrets:          concat(layers, "secrets", func(s *sdk.StepSpec) []string { return s.Secrets }),
		labels:           keyed(layers, "labels", func(s *sdk.StepSpec) []sdk.KeyValue { return s.Labels }, kvKey),
		annotations:      keyed(layers, "annotations", func(s *sdk.StepSpec) []sdk.KeyValue { return s.Annotations }, kvKey),
		serviceAccount:   pick(layers, "serviceAccount", func(s *sdk.StepSpec) *string { return s.ServiceAccount }),
		namespace:        pick(layers, "namespace", func(s *sdk.StepSpec) *string { return s.Namespace }),
		volumes:          concat(layers, "volumes", func(s *sdk.StepSpec) []sdk.VolumeSpec { return s.Volumes }),
		port:             pick(layers, "port", func(s *sdk.StepSpec) *int { return s.Port }),
		nodes:            pick(layers, "nodes", func(s *sdk.StepSpec) *int { return s.Nodes }),
		runAsUser:        pick(layers, "runAsUser", func(s *sdk.StepSpec) *int64 { return s.RunAsUser }),
		runAsNonRoot:     pick(layers, "runAsNonRoot", func(s *sdk.StepSpec) *bool { return s.RunAsNonRoot }),
		hostNetwork:      pick(layers, "hostNetwork", func(s *sdk.StepSpec) *bool { return s.HostNetwork }),
		noArtifacts:      pick(layers, "noArtifacts", func(s *sdk.StepSpec) *bool { return s.NoArtifacts }),

		retry:        pick(layers, "retry", func(s *sdk.StepSpec) *int { return s.Retry }),
		retryBackoff: pick(layers, "retryBackoff", func(s *sdk.StepSpec) *time.Duration { return s.RetryBackoff }),
		timeout:      pick(layers, "timeout", func(s *sdk.StepSpec) *time.Duration { return s.Timeout }),

		dra:    pick(layers, "dra", func(s *sdk.StepSpec) *bool { return s.DRA }),
		claims: concat(layers, "claims", func(s *sdk.StepSpec) []string { return s.Claims }),
	}
	if override.Run != nil {
		r.run = override.Run
	}
	if override.Command != nil {
		r.command = override.Command
	}
	if override.Foreach != nil {
		r.foreach, r.foreachOf = override.Foreach, nil
	}
	if override.ForeachOf != nil {
		r.foreach, r.foreachOf = nil, override.ForeachOf
	}
	if override.When != nil {
		r.when = override.When
	}
	r.neuron, r.efaCount = sources(layers)
	return r
}

// A source is one layer's word on a device count: an option (Trainium,
// Inferentia, EFA, EFAAll) or a Resource of the device's own name.
type source struct {
	// opt names the option, as the sdk spells it ("Trainium", "Resource").
	opt string
	n   int64
	// all is set for EFAAll, whose count is the instance type's.
	all   bool
	at    *field.Path
	layer int
}

// sources returns what each layer says of the step's Neuron devices and EFA
// interfaces, highest layer first.
func sources(layers []layer) (neuron, efa []source) {
	for i, l := range layers {
		s := l.spec
		if s.Trainium != nil {
			neuron = append(neuron, source{opt: "Trainium", n: int64(*s.Trainium), at: l.child("trainium"), layer: i})
		}
		if s.Inferentia != nil {
			neuron = append(neuron, source{opt: "Inferentia", n: int64(*s.Inferentia), at: l.child("inferentia"), layer: i})
		}
		if s.EFAAll {
			efa = append(efa, source{opt: "EFAAll", all: true, at: l.child("efa"), layer: i})
		}
		if s.EFA != nil {
			efa = append(efa, source{opt: "EFA", n: int64(*s.EFA), at: l.child("efa"), layer: i})
		}
		for _, res := range s.Resources {
			src := source{opt: "Resource", n: res.Count, at: l.child("resources").Key(res.Name), layer: i}
			switch res.Name {
			case plan.ResourceNeuron:
				neuron = append(neuron, src)
			case plan.ResourceEFA:
				efa = append(efa, src)
			}
		}
	}
	return neuron, efa
}

// pick returns the value of the highest layer that sets it.
func pick[T any](layers []layer, name string, get func(*sdk.StepSpec) *T) val[T] {
	for i, l := range layers {
		if p := get(l.spec); p != nil {
			return val[T]{v: *p, set: true, at: l.child(name), layer: i}
		}
	}
	return val[T]{}
}

// concat returns every layer's elements, lowest layer first.
func concat[T any](layers []layer, name string, get func(*sdk.StepSpec) []T) []item[T] {
	var out []item[T]
	for i := len(layers) - 1; i >= 0; i-- {
		for j, v := range get(layers[i].spec) {
			out = append(out, item[T]{v: v, at: layers[i].child(name).Index(j), layer: i})
		}
	}
	return out
}

// keyed merges keyed elements: an element keeps the position where its key first
// appeared, lowest layer first, and takes the value of the highest layer.
func keyed[T any](layers []layer, name string, get func(*sdk.StepSpec) []T, key func(T) string) []item[T] {
	var out []item[T]
	pos := map[string]int{}
	for i := len(layers) - 1; i >= 0; i-- {
		for _, v := range get(layers[i].spec) {
			it := item[T]{v: v, at: layers[i].child(name).Key(key(v)), layer: i}
			if p, ok := pos[key(v)]; ok {
				out[p] = it
				continue
			}
			pos[key(v)] = len(out)
			out = append(out, it)
		}
	}
	return out
}

func kvKey(kv sdk.KeyValue) string { return kv.Key }
