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

// acceleratorCase is a flow "f" with one step "s" (one() plus opts) and the step it
// must compile to.
type acceleratorCase struct {
	name string
	opts []sdk.StepOption
	cfg  compile.Config
	want plan.Step
}

func runAcceleratorCases(t *testing.T, cases []acceleratorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustStep(t, one(tc.opts...), compile.Options{Config: tc.cfg}, "s")
			if diff := cmp.Diff(tc.want, got, planOpts); diff != "" {
				t.Errorf("step (-want +got):\n%s", diff)
			}
		})
	}
}

// errorCase is a flow that must not compile, the errors it must give, and for each
// error optionally a phrase its detail must contain.
type errorCase struct {
	name    string
	flow    *sdk.Flow
	opts    compile.Options
	want    field.ErrorList
	details []string
}

func runErrorCases(t *testing.T, cases []errorCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := wantErrs(t, tc.flow, tc.opts, tc.want)
			for i, d := range tc.details {
				wantDetail(t, got, i, d)
			}
		})
	}
}

func TestNeuron(t *testing.T) {
	runAcceleratorCases(t, []acceleratorCase{
		{
			name: "trainium",
			opts: []sdk.StepOption{sdk.Trainium(16)},
			want: with(func(s *plan.Step) {
				s.Neuron = 16
				s.Requests = q(neuronKey, "16")
				s.Limits = q(neuronKey, "16")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "inferentia collapses into neuron",
			opts: []sdk.StepOption{sdk.Inferentia(2)},
			want: with(func(s *plan.Step) {
				s.Neuron = 2
				s.Requests = q(neuronKey, "2")
				s.Limits = q(neuronKey, "2")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "inferentia on an inf2 instance",
			opts: []sdk.StepOption{sdk.Inferentia(1), sdk.InstanceType("inf2.xlarge")},
			want: with(func(s *plan.Step) {
				s.Neuron = 1
				s.InstanceType = "inf2.xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "inf2.xlarge"}}
				s.Requests = q(neuronKey, "1")
				s.Limits = q(neuronKey, "1")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "last trainium wins",
			opts: []sdk.StepOption{sdk.Trainium(0), sdk.Trainium(4)},
			want: with(func(s *plan.Step) {
				s.Neuron = 4
				s.Requests = q(neuronKey, "4")
				s.Limits = q(neuronKey, "4")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
	})
}

func TestInferentiaLeavesNoTrace(t *testing.T) {
	f := sdk.NewFlow("serve", sdk.Image(img)).
		Step("load", sdk.Command("true"), sdk.Inferentia(6), sdk.InstanceType("inf2.24xlarge")).
		Step("answer", sdk.Command("true"), sdk.After("load"), sdk.Inferentia(1))
	p := mustCompile(t, f, compile.Options{})
	if text := planText(t, p); strings.Contains(text, "inferentia") {
		t.Errorf("the plan mentions inferentia:\n%s", text)
	}
	if got := p.Step("load").Neuron; got != 6 {
		t.Errorf("load: Neuron = %d, want 6", got)
	}
	if got := p.Step("answer").Neuron; got != 1 {
		t.Errorf("answer: Neuron = %d, want 1", got)
	}
}

func TestNeuronErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name: "trainium and inferentia, equal",
			flow: one(sdk.Trainium(2), sdk.Inferentia(2)),
			want: field.ErrorList{field.Forbidden(sAt("inferentia"), "")},
		},
		{
			name: "trainium and inferentia, different",
			flow: one(sdk.Trainium(1), sdk.Inferentia(4)),
			want: field.ErrorList{field.Forbidden(sAt("inferentia"), "")},
		},
		{
			name:    "trainium zero",
			flow:    one(sdk.Trainium(0)),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"leave out sdk.Trainium"},
		},
		{
			name:    "trainium negative",
			flow:    one(sdk.Trainium(-1)),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"leave out sdk.Trainium"},
		},
		{
			name:    "inferentia zero",
			flow:    one(sdk.Inferentia(0)),
			want:    field.ErrorList{field.Invalid(sAt("inferentia"), nil, "")},
			details: []string{"leave out sdk.Inferentia"},
		},
		{
			name:    "inferentia negative",
			flow:    one(sdk.Inferentia(-3)),
			want:    field.ErrorList{field.Invalid(sAt("inferentia"), nil, "")},
			details: []string{"leave out sdk.Inferentia"},
		},
		{
			name:    "efa zero",
			flow:    one(sdk.EFA(0)),
			want:    field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
			details: []string{"leave out sdk.EFA"},
		},
		{
			name:    "efa negative",
			flow:    one(sdk.EFA(-8)),
			want:    field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
			details: []string{"leave out sdk.EFA"},
		},
		{
			name: "last trainium wins, and it is zero",
			flow: one(sdk.Trainium(4), sdk.Trainium(0)),
			want: field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
		},
		{
			name: "flow default trainium zero, reported once",
			flow: sdk.NewFlow("f", sdk.Image(img), sdk.Trainium(0)).
				Step("a", sdk.Command("true")).
				Step("b", sdk.Command("true")),
			want:    field.ErrorList{field.Invalid(field.NewPath("flow", "trainium"), nil, "")},
			details: []string{"leave out sdk.Trainium"},
		},
		{
			name: "flow default efa zero, reported once",
			flow: sdk.NewFlow("f", sdk.Image(img), sdk.EFA(0)).
				Step("a", sdk.Command("true")).
				Step("b", sdk.Command("true")),
			want:    field.ErrorList{field.Invalid(field.NewPath("flow", "efa"), nil, "")},
			details: []string{"leave out sdk.EFA"},
		},
	})
}

func TestGPU(t *testing.T) {
	off := false
	on := true
	runAcceleratorCases(t, []acceleratorCase{
		{
			name: "gpu zero with trainium is no gpu",
			opts: []sdk.StepOption{sdk.GPU(0), sdk.Trainium(4)},
			want: with(func(s *plan.Step) {
				s.Neuron = 4
				s.Requests = q(neuronKey, "4")
				s.Limits = q(neuronKey, "4")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "gpu zero alone",
			opts: []sdk.StepOption{sdk.GPU(0)},
			want: cmdStep(),
		},
		{
			name: "nvidia by default",
			opts: []sdk.StepOption{sdk.GPU(2)},
			want: with(func(s *plan.Step) {
				s.GPU = 2
				s.GPUResource = nvidiaKey
				s.Requests = q(nvidiaKey, "2")
				s.Limits = q(nvidiaKey, "2")
				s.Tolerations = []plan.Toleration{nvidiaTol}
			}),
		},
		{
			name: "nvidia by name",
			opts: []sdk.StepOption{sdk.GPU(1), sdk.GPUVendor("nvidia")},
			want: with(func(s *plan.Step) {
				s.GPU = 1
				s.GPUResource = nvidiaKey
				s.Requests = q(nvidiaKey, "1")
				s.Limits = q(nvidiaKey, "1")
				s.Tolerations = []plan.Toleration{nvidiaTol}
			}),
		},
		{
			name: "amd",
			opts: []sdk.StepOption{sdk.GPU(2), sdk.GPUVendor("amd")},
			want: with(func(s *plan.Step) {
				s.GPU = 2
				s.GPUResource = amdKey
				s.Requests = q(amdKey, "2")
				s.Limits = q(amdKey, "2")
				s.Tolerations = []plan.Toleration{amdTol}
			}),
		},
		{
			name: "gpu on p5",
			opts: []sdk.StepOption{sdk.GPU(8), sdk.InstanceType("p5.48xlarge")},
			want: with(func(s *plan.Step) {
				s.GPU = 8
				s.GPUResource = nvidiaKey
				s.InstanceType = "p5.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "p5.48xlarge"}}
				s.Requests = q(nvidiaKey, "8")
				s.Limits = q(nvidiaKey, "8")
				s.Tolerations = []plan.Toleration{nvidiaTol}
			}),
		},
		{
			name: "gpu_toleration = false drops the toleration",
			opts: []sdk.StepOption{sdk.GPU(1)},
			cfg:  compile.Config{GPUToleration: &off},
			want: with(func(s *plan.Step) {
				s.GPU = 1
				s.GPUResource = nvidiaKey
				s.Requests = q(nvidiaKey, "1")
				s.Limits = q(nvidiaKey, "1")
			}),
		},
		{
			name: "gpu_toleration = false, amd",
			opts: []sdk.StepOption{sdk.GPU(1), sdk.GPUVendor("amd")},
			cfg:  compile.Config{GPUToleration: &off},
			want: with(func(s *plan.Step) {
				s.GPU = 1
				s.GPUResource = amdKey
				s.Requests = q(amdKey, "1")
				s.Limits = q(amdKey, "1")
			}),
		},
		{
			name: "gpu_toleration = true keeps it",
			opts: []sdk.StepOption{sdk.GPU(1)},
			cfg:  compile.Config{GPUToleration: &on},
			want: with(func(s *plan.Step) {
				s.GPU = 1
				s.GPUResource = nvidiaKey
				s.Requests = q(nvidiaKey, "1")
				s.Limits = q(nvidiaKey, "1")
				s.Tolerations = []plan.Toleration{nvidiaTol}
			}),
		},
		{
			name: "gpu_toleration = false keeps the neuron toleration",
			opts: []sdk.StepOption{sdk.Trainium(1)},
			cfg:  compile.Config{GPUToleration: &off},
			want: with(func(s *plan.Step) {
				s.Neuron = 1
				s.Requests = q(neuronKey, "1")
				s.Limits = q(neuronKey, "1")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
	})
}

func TestGPUZeroLeavesNoTrace(t *testing.T) {
	p := mustCompile(t, one(sdk.GPU(0), sdk.Trainium(16), sdk.InstanceType("trn1.32xlarge")), compile.Options{})
	text := planText(t, p)
	for _, word := range []string{"nvidia", "amd.com"} {
		if strings.Contains(text, word) {
			t.Errorf("the plan of a GPU(0) step mentions %s:\n%s", word, text)
		}
	}
}

func TestGPUErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name: "gpu with trainium",
			flow: one(sdk.GPU(1), sdk.Trainium(1)),
			want: field.ErrorList{field.Forbidden(sAt("gpu"), "")},
		},
		{
			name: "gpu with inferentia",
			flow: one(sdk.Inferentia(1), sdk.GPU(8)),
			want: field.ErrorList{field.Forbidden(sAt("gpu"), "")},
		},
		{
			name: "gpu with a neuron resource",
			flow: one(sdk.GPU(1), sdk.Resource(neuronKey, 2)),
			want: field.ErrorList{field.Forbidden(sAt("gpu"), "")},
		},
		{
			name: "unknown vendor",
			flow: one(sdk.GPU(1), sdk.GPUVendor("intel")),
			want: field.ErrorList{field.NotSupported(sAt("gpuVendor"), "intel", []string{"nvidia", "amd"})},
		},
		{
			name: "vendor is case sensitive",
			flow: one(sdk.GPU(1), sdk.GPUVendor("NVIDIA")),
			want: field.ErrorList{field.NotSupported(sAt("gpuVendor"), "NVIDIA", []string{"nvidia", "amd"})},
		},
		{
			name: "negative gpu",
			flow: one(sdk.GPU(-1)),
			want: field.ErrorList{field.Invalid(sAt("gpu"), nil, "")},
		},
		{
			name: "more gpus than p5 has",
			flow: one(sdk.GPU(9), sdk.InstanceType("p5.48xlarge")),
			want: field.ErrorList{field.Invalid(sAt("gpu"), nil, "")},
		},
		{
			name: "amd on an nvidia instance",
			flow: one(sdk.GPU(1), sdk.GPUVendor("amd"), sdk.InstanceType("p5.48xlarge")),
			want: field.ErrorList{field.Invalid(sAt("gpu"), nil, "")},
		},
		{
			name: "flow default gpu with a trainium step",
			flow: sdk.NewFlow("f", sdk.Image(img), sdk.GPU(1)).
				Step("s", sdk.Command("true"), sdk.Trainium(1)),
			want: field.ErrorList{field.Forbidden(sAt("gpu"), "")},
		},
	})
}

func TestResource(t *testing.T) {
	runAcceleratorCases(t, []acceleratorCase{
		{
			name: "extended resource in requests and limits",
			opts: []sdk.StepOption{sdk.Resource("example.com/fpga", 2)},
			want: with(func(s *plan.Step) {
				s.Requests = q("example.com/fpga", "2")
				s.Limits = q("example.com/fpga", "2")
			}),
		},
		{
			name: "later resource of the same name replaces",
			opts: []sdk.StepOption{sdk.Resource("example.com/fpga", 2), sdk.Resource("example.com/fpga", 3)},
			want: with(func(s *plan.Step) {
				s.Requests = q("example.com/fpga", "3")
				s.Limits = q("example.com/fpga", "3")
			}),
		},
		{
			name: "sorted among cpu and memory",
			opts: []sdk.StepOption{sdk.Memory("1Gi"), sdk.Resource("example.com/fpga", 1), sdk.CPU("2")},
			want: with(func(s *plan.Step) {
				s.Requests = q("cpu", "2", "example.com/fpga", "1", "memory", "1Gi")
				s.Limits = q("example.com/fpga", "1", "memory", "1Gi")
			}),
		},
		{
			name: "neuron resource alone acts as trainium",
			opts: []sdk.StepOption{sdk.Resource(neuronKey, 4)},
			want: with(func(s *plan.Step) {
				s.Neuron = 4
				s.Requests = q(neuronKey, "4")
				s.Limits = q(neuronKey, "4")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "neuron resource equal to trainium",
			opts: []sdk.StepOption{sdk.Trainium(16), sdk.Resource(neuronKey, 16)},
			want: with(func(s *plan.Step) {
				s.Neuron = 16
				s.Requests = q(neuronKey, "16")
				s.Limits = q(neuronKey, "16")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "efa resource acts as efa",
			opts: []sdk.StepOption{sdk.Resource(efaKey, 8)},
			want: with(func(s *plan.Step) {
				s.EFA = 8
				s.Requests = q(efaKey, "8")
				s.Limits = q(efaKey, "8")
			}),
		},
		{
			name: "gpu resource acts as gpu",
			opts: []sdk.StepOption{sdk.Resource(nvidiaKey, 2)},
			want: with(func(s *plan.Step) {
				s.GPU = 2
				s.GPUResource = nvidiaKey
				s.Requests = q(nvidiaKey, "2")
				s.Limits = q(nvidiaKey, "2")
				s.Tolerations = []plan.Toleration{nvidiaTol}
			}),
		},
		{
			name: "neuroncore resource tolerates the neuron taint",
			opts: []sdk.StepOption{sdk.Resource("aws.amazon.com/neuroncore", 2)},
			want: with(func(s *plan.Step) {
				s.Requests = q("aws.amazon.com/neuroncore", "2")
				s.Limits = q("aws.amazon.com/neuroncore", "2")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
	})
}

func TestResourceErrors(t *testing.T) {
	res := func(name string) *field.Path { return sAt("resources").Key(name) }
	runErrorCases(t, []errorCase{
		{
			name: "neuron resource disagrees with trainium",
			flow: one(sdk.Trainium(16), sdk.Resource(neuronKey, 4)),
			want: field.ErrorList{field.Invalid(res(neuronKey), nil, "")},
		},
		{
			name: "neuron resource disagrees with inferentia",
			flow: one(sdk.Inferentia(1), sdk.Resource(neuronKey, 2)),
			want: field.ErrorList{field.Invalid(res(neuronKey), nil, "")},
		},
		{
			name: "efa resource disagrees with efa",
			flow: one(sdk.EFA(8), sdk.Resource(efaKey, 4)),
			want: field.ErrorList{field.Invalid(res(efaKey), nil, "")},
		},
		{
			name: "gpu resource disagrees with gpu",
			flow: one(sdk.GPU(2), sdk.Resource(nvidiaKey, 1)),
			want: field.ErrorList{field.Invalid(res(nvidiaKey), nil, "")},
		},
		{
			name: "gpu resource of another vendor",
			flow: one(sdk.GPUVendor("amd"), sdk.Resource(nvidiaKey, 1)),
			want: field.ErrorList{field.Invalid(res(nvidiaKey), nil, "")},
		},
		{
			name: "no domain: cpu",
			flow: one(sdk.Resource("cpu", 1)),
			want: field.ErrorList{field.Invalid(res("cpu"), nil, "")},
		},
		{
			name: "no domain: hugepages",
			flow: one(sdk.Resource("hugepages-2Mi", 1)),
			want: field.ErrorList{field.Invalid(res("hugepages-2Mi"), nil, "")},
		},
		{
			name: "kubernetes.io is not extended",
			flow: one(sdk.Resource("kubernetes.io/foo", 1)),
			want: field.ErrorList{field.Invalid(res("kubernetes.io/foo"), nil, "")},
		},
		{
			name:    "zero count",
			flow:    one(sdk.Resource("example.com/fpga", 0)),
			want:    field.ErrorList{field.Invalid(res("example.com/fpga"), nil, "")},
			details: []string{"leave out sdk.Resource"},
		},
		{
			name: "negative count",
			flow: one(sdk.Resource("example.com/fpga", -1)),
			want: field.ErrorList{field.Invalid(res("example.com/fpga"), nil, "")},
		},
		{
			name: "neuron resource above the instance",
			flow: one(sdk.Resource(neuronKey, 17), sdk.InstanceType("trn1.32xlarge")),
			want: field.ErrorList{field.Invalid(res(neuronKey), nil, "")},
		},
		{
			name: "trainium with neuroncores",
			flow: one(sdk.Trainium(1), sdk.Resource("aws.amazon.com/neuroncore", 2)),
			want: field.ErrorList{field.Forbidden(sAt("trainium"), "")},
		},
	})
}

func TestInstanceType(t *testing.T) {
	runAcceleratorCases(t, []acceleratorCase{
		{
			name: "instance type alone",
			opts: []sdk.StepOption{sdk.InstanceType("p5.48xlarge")},
			want: with(func(s *plan.Step) {
				s.InstanceType = "p5.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "p5.48xlarge"}}
			}),
		},
		{
			name: "the maximum of trn1.32xlarge",
			opts: []sdk.StepOption{sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8)},
			want: with(func(s *plan.Step) {
				s.InstanceType = "trn1.32xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "trn1.32xlarge"}}
				s.Neuron, s.EFA = 16, 8
				s.Requests = q(neuronKey, "16", efaKey, "8")
				s.Limits = q(neuronKey, "16", efaKey, "8")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "efa all on p5",
			opts: []sdk.StepOption{sdk.InstanceType("p5.48xlarge"), sdk.EFAAll()},
			want: with(func(s *plan.Step) {
				s.InstanceType = "p5.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "p5.48xlarge"}}
				s.EFA, s.EFAAll = 32, true
				s.Requests = q(efaKey, "32")
				s.Limits = q(efaKey, "32")
			}),
		},
		{
			name: "efa all on trn1.32xlarge",
			opts: []sdk.StepOption{sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFAAll()},
			want: with(func(s *plan.Step) {
				s.InstanceType = "trn1.32xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "trn1.32xlarge"}}
				s.Neuron, s.EFA, s.EFAAll = 16, 8, true
				s.Requests = q(neuronKey, "16", efaKey, "8")
				s.Limits = q(neuronKey, "16", efaKey, "8")
				s.Tolerations = []plan.Toleration{neuronTol}
			}),
		},
		{
			name: "efa after efa all wins",
			opts: []sdk.StepOption{sdk.InstanceType("p5.48xlarge"), sdk.EFAAll(), sdk.EFA(4)},
			want: with(func(s *plan.Step) {
				s.InstanceType = "p5.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "p5.48xlarge"}}
				s.EFA = 4
				s.Requests = q(efaKey, "4")
				s.Limits = q(efaKey, "4")
			}),
		},
		{
			name: "a cpu step on a general-purpose type",
			opts: []sdk.StepOption{sdk.InstanceType("m7i.8xlarge"), sdk.CPU("4")},
			want: with(func(s *plan.Step) {
				s.InstanceType = "m7i.8xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "m7i.8xlarge"}}
				s.Requests = q("cpu", "4")
			}),
		},
		{
			name: "compute- and memory-optimized types",
			opts: []sdk.StepOption{sdk.InstanceType("c7i.4xlarge"), sdk.InstanceType("r7i.2xlarge")},
			want: with(func(s *plan.Step) {
				s.InstanceType = "r7i.2xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "r7i.2xlarge"}}
			}),
		},
		{
			// The catalog has no figures for g5: it does not refuse its GPUs.
			name: "gpus on a gpu type outside the table",
			opts: []sdk.StepOption{sdk.InstanceType("g5.xlarge"), sdk.GPU(1)},
			want: with(func(s *plan.Step) {
				s.InstanceType = "g5.xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "g5.xlarge"}}
				s.GPU, s.GPUResource = 1, nvidiaKey
				s.Requests = q(nvidiaKey, "1")
				s.Limits = q(nvidiaKey, "1")
				s.Tolerations = []plan.Toleration{nvidiaTol}
			}),
		},
		{
			name: "agreeing node selector",
			opts: []sdk.StepOption{sdk.NodeSelector(instanceKey, "trn1.32xlarge"), sdk.InstanceType("trn1.32xlarge"), sdk.NodeSelector("zone", "a")},
			want: with(func(s *plan.Step) {
				s.InstanceType = "trn1.32xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "trn1.32xlarge"}, {Key: "zone", Value: "a"}}
			}),
		},
	})
}

func TestEFAAllFromFlowDefault(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.EFAAll()).
		Step("all", sdk.Command("true"), sdk.InstanceType("trn1.32xlarge")).
		Step("four", sdk.Command("true"), sdk.InstanceType("p5.48xlarge"), sdk.EFA(4)).
		Step("p5", sdk.Command("true"), sdk.InstanceType("p5.48xlarge"))
	p := mustCompile(t, f, compile.Options{})
	for step, want := range map[string]int{"all": 8, "four": 4, "p5": 32} {
		if got := p.Step(step).EFA; got != want {
			t.Errorf("%s: EFA = %d, want %d", step, got, want)
		}
	}
}

func TestInstanceTypeErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name: "efa above trn1.32xlarge",
			flow: one(sdk.InstanceType("trn1.32xlarge"), sdk.EFA(32)),
			want: field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
		},
		{
			name: "one efa above trn1.32xlarge",
			flow: one(sdk.InstanceType("trn1.32xlarge"), sdk.EFA(9)),
			want: field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
		},
		{
			name: "trainium above trn1.32xlarge",
			flow: one(sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(17)),
			want: field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
		},
		{
			name: "trainium on p5",
			flow: one(sdk.InstanceType("p5.48xlarge"), sdk.Trainium(1)),
			want: field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
		},
		{
			name: "inferentia above inf2.xlarge",
			flow: one(sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(2)),
			want: field.ErrorList{field.Invalid(sAt("inferentia"), nil, "")},
		},
		{
			name: "gpu on inf2",
			flow: one(sdk.InstanceType("inf2.xlarge"), sdk.GPU(1)),
			want: field.ErrorList{field.Invalid(sAt("gpu"), nil, "")},
		},
		{
			name: "efa on inf2",
			flow: one(sdk.InstanceType("inf2.xlarge"), sdk.EFA(1)),
			want: field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
		},
		{
			name: "efa all without instance type",
			flow: one(sdk.EFAAll()),
			want: field.ErrorList{field.Required(sAt("instanceType"), "")},
		},
		{
			name: "efa all on an instance without efa",
			flow: one(sdk.InstanceType("inf2.xlarge"), sdk.EFAAll()),
			want: field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
		},
		{
			name:    "unknown instance type",
			flow:    one(sdk.InstanceType("trn9.huge")),
			want:    field.ErrorList{field.Invalid(sAt("instanceType"), nil, "")},
			details: []string{"is not an EC2 instance type"},
		},
		{
			name:    "a slip of a letter",
			flow:    one(sdk.InstanceType("m7i.8xlarg")),
			want:    field.ErrorList{field.Invalid(sAt("instanceType"), nil, "")},
			details: []string{"did you mean m7i.8xlarge?"},
		},
		{
			name:    "a family that does not exist",
			flow:    one(sdk.InstanceType("m99.large")),
			want:    field.ErrorList{field.Invalid(sAt("instanceType"), nil, "")},
			details: []string{".large"},
		},
		{
			name:    "no instance type at all",
			flow:    one(sdk.InstanceType("foo")),
			want:    field.ErrorList{field.Invalid(sAt("instanceType"), nil, "")},
			details: []string{"aws ec2 describe-instance-types"},
		},
		{
			name:    "trainium on a general-purpose type",
			flow:    one(sdk.InstanceType("m7i.8xlarge"), sdk.Trainium(16)),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"m7i.8xlarge has no Neuron devices; 16 are on trn1.32xlarge, trn1n.32xlarge, trn2.48xlarge"},
		},
		{
			name:    "gpus on a general-purpose type",
			flow:    one(sdk.InstanceType("c7i.4xlarge"), sdk.GPU(8)),
			want:    field.ErrorList{field.Invalid(sAt("gpu"), nil, "")},
			details: []string{"c7i.4xlarge has no GPUs; 8 are on p4d.24xlarge"},
		},
		{
			name:    "trainium on a gpu type outside the table",
			flow:    one(sdk.InstanceType("g5.xlarge"), sdk.Trainium(1)),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), nil, "")},
			details: []string{"g5.xlarge has no Neuron devices"},
		},
		{
			name:    "every efa of a type whose efa the catalog does not know",
			flow:    one(sdk.InstanceType("m7i.48xlarge"), sdk.EFAAll()),
			want:    field.ErrorList{field.Invalid(sAt("efa"), nil, "")},
			details: []string{"sdk.EFA(n)"},
		},
		{
			name: "node selector disagrees with instance type",
			flow: one(sdk.NodeSelector(instanceKey, "p5.48xlarge"), sdk.InstanceType("trn1.32xlarge")),
			want: field.ErrorList{field.Invalid(sAt("nodeSelector").Key(instanceKey), nil, "")},
		},
	})
}
