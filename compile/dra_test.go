package compile_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// Device classes and attributes, spelt out here rather than taken from the code
// under test.
const (
	neuronClass = "neuron.aws.com"
	efaClass    = "efa.networking.k8s.aws"
	gpuClass    = "gpu.nvidia.com"
)

func TestDRA(t *testing.T) {
	runAcceleratorCases(t, []acceleratorCase{
		{
			name: "neuron and efa share a device group of the neuron count",
			opts: []sdk.StepOption{sdk.Trainium(4), sdk.EFA(4), sdk.CPU("8"), sdk.DRA(), sdk.InstanceType("trn2.48xlarge")},
			want: with(func(s *plan.Step) {
				s.Neuron, s.EFA = 4, 4
				s.InstanceType = "trn2.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "trn2.48xlarge"}}
				s.Requests = q("cpu", "8") // no device-plugin resources, no Neuron toleration
				s.DRA = &plan.DRA{
					Requests: []plan.DeviceRequest{
						{Name: "neuron", Class: neuronClass, Count: 4},
						{Name: "efa", Class: efaClass, Count: 4},
					},
					Constraints: []plan.DeviceConstraint{{Requests: []string{"neuron", "efa"}, MatchAttribute: "resource.aws.com/devicegroup4_id"}},
				}
			}),
		},
		{
			name: "EFAAll takes the catalog's count",
			opts: []sdk.StepOption{sdk.Trainium(16), sdk.EFAAll(), sdk.DRA(), sdk.InstanceType("trn2.48xlarge")},
			want: with(func(s *plan.Step) {
				s.Neuron, s.EFA, s.EFAAll = 16, 16, true
				s.InstanceType = "trn2.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "trn2.48xlarge"}}
				s.DRA = &plan.DRA{
					Requests: []plan.DeviceRequest{
						{Name: "neuron", Class: neuronClass, Count: 16},
						{Name: "efa", Class: efaClass, Count: 16},
					},
					Constraints: []plan.DeviceConstraint{{Requests: []string{"neuron", "efa"}, MatchAttribute: "resource.aws.com/devicegroup16_id"}},
				}
			}),
		},
		{
			name: "gpu and efa share a PCIe root; the user's own toleration stays",
			opts: []sdk.StepOption{sdk.GPU(1), sdk.EFA(1), sdk.DRA(), sdk.Toleration(nvidiaKey, "", "NoSchedule")},
			want: with(func(s *plan.Step) {
				s.GPU, s.EFA, s.GPUResource = 1, 1, nvidiaKey
				s.Tolerations = []plan.Toleration{nvidiaTol}
				s.DRA = &plan.DRA{
					Requests: []plan.DeviceRequest{
						{Name: "gpu-0", Class: gpuClass, Count: 1},
						{Name: "efa-0", Class: efaClass, Count: 1},
					},
					Constraints: []plan.DeviceConstraint{{Requests: []string{"gpu-0", "efa-0"}, MatchAttribute: "resource.kubernetes.io/pcieRoot"}},
				}
			}),
		},
		{
			name: "neuron alone needs no constraint, and any count",
			opts: []sdk.StepOption{sdk.Inferentia(2), sdk.DRA()},
			want: with(func(s *plan.Step) {
				s.Neuron = 2
				s.DRA = &plan.DRA{Requests: []plan.DeviceRequest{{Name: "neuron", Class: neuronClass, Count: 2}}}
			}),
		},
		{
			name: "configured device classes",
			opts: []sdk.StepOption{sdk.Trainium(8), sdk.EFA(8), sdk.DRA()},
			cfg:  compile.Config{DeviceClasses: compile.ConfigDeviceClasses{Neuron: "n.example.com", EFA: "efa.example.com", GPU: "gpu.example.com"}},
			want: with(func(s *plan.Step) {
				s.Neuron, s.EFA = 8, 8
				s.DRA = &plan.DRA{
					Requests: []plan.DeviceRequest{
						{Name: "neuron", Class: "n.example.com", Count: 8},
						{Name: "efa", Class: "efa.example.com", Count: 8},
					},
					Constraints: []plan.DeviceConstraint{{Requests: []string{"neuron", "efa"}, MatchAttribute: "resource.aws.com/devicegroup8_id"}},
				}
			}),
		},
		{
			name: "each GPU with the EFA interfaces under its PCIe root",
			opts: []sdk.StepOption{sdk.GPU(8), sdk.EFAAll(), sdk.DRA(), sdk.InstanceType("p5.48xlarge")},
			want: with(func(s *plan.Step) {
				s.GPU, s.EFA, s.EFAAll, s.GPUResource = 8, 32, true, nvidiaKey
				s.InstanceType = "p5.48xlarge"
				s.NodeSelector = []plan.KeyValue{{Key: instanceKey, Value: "p5.48xlarge"}}
				s.DRA = &plan.DRA{}
				for i := range 8 {
					gpu, efa := fmt.Sprintf("gpu-%d", i), fmt.Sprintf("efa-%d", i)
					s.DRA.Requests = append(s.DRA.Requests, plan.DeviceRequest{Name: gpu, Class: gpuClass, Count: 1}, plan.DeviceRequest{Name: efa, Class: efaClass, Count: 4})
					s.DRA.Constraints = append(s.DRA.Constraints, plan.DeviceConstraint{Requests: []string{gpu, efa}, MatchAttribute: "resource.kubernetes.io/pcieRoot"})
				}
			}),
		},
		{
			name: "GPUs sharing an EFA interface under their PCIe root",
			opts: []sdk.StepOption{sdk.GPU(8), sdk.EFA(4), sdk.DRA()},
			want: with(func(s *plan.Step) {
				s.GPU, s.EFA, s.GPUResource = 8, 4, nvidiaKey
				s.DRA = &plan.DRA{}
				for i := range 4 {
					gpu, efa := fmt.Sprintf("gpu-%d", i), fmt.Sprintf("efa-%d", i)
					s.DRA.Requests = append(s.DRA.Requests, plan.DeviceRequest{Name: gpu, Class: gpuClass, Count: 2}, plan.DeviceRequest{Name: efa, Class: efaClass, Count: 1})
					s.DRA.Constraints = append(s.DRA.Constraints, plan.DeviceConstraint{Requests: []string{gpu, efa}, MatchAttribute: "resource.kubernetes.io/pcieRoot"})
				}
			}),
		},
		{
			name: "installed templates without DRA keep the device-plugin resources",
			opts: []sdk.StepOption{sdk.Trainium(1), sdk.Claim("fpga"), sdk.Claim("nic"), sdk.Claim("fpga")},
			want: with(func(s *plan.Step) {
				s.Neuron = 1
				s.Requests = q(neuronKey, "1")
				s.Limits = q(neuronKey, "1")
				s.Tolerations = []plan.Toleration{neuronTol}
				s.DRA = &plan.DRA{Templates: []string{"fpga", "nic"}}
			}),
		},
	})
}

// TestDRAFlowDefault: sdk.DRA() as the flow's default claims the devices of the
// steps that ask some and leaves the others as they are.
func TestDRAFlowDefault(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.DRA()).
		Step("prepare", sdk.Command("true")).
		Step("train", sdk.Command("true"), sdk.Trainium(1), sdk.EFA(1))
	p := mustCompile(t, f, compile.Options{})
	if s := p.Step("prepare"); s.DRA != nil {
		t.Errorf("prepare: DRA %+v, want none", s.DRA)
	}
	s := p.Step("train")
	if s.DRA == nil || len(s.DRA.Requests) != 2 || len(s.DRA.Constraints) != 1 || s.DRA.Constraints[0].MatchAttribute != "resource.aws.com/devicegroup1_id" {
		t.Errorf("train: DRA %+v, want neuron and efa in devicegroup1", s.DRA)
	}
	if len(s.Requests) != 0 || len(s.Tolerations) != 0 {
		t.Errorf("train: requests %v, tolerations %v; want none", s.Requests, s.Tolerations)
	}
}

func TestDRAErrors(t *testing.T) {
	runErrorCases(t, []errorCase{
		{
			name:    "neuron count without a device group, with EFA",
			flow:    one(sdk.Trainium(2), sdk.EFA(2), sdk.DRA()),
			want:    field.ErrorList{field.Invalid(sAt("trainium"), 2, "")},
			details: []string{"1, 4, 8 or 16"},
		},
		{
			name: "inferentia count without a device group names inferentia",
			flow: one(sdk.Inferentia(6), sdk.EFA(1), sdk.DRA()),
			want: field.ErrorList{field.Invalid(sAt("inferentia"), 6, "")},
		},
		{
			name:    "DRA on a step without devices",
			flow:    one(sdk.CPU("1"), sdk.DRA()),
			want:    field.ErrorList{field.Invalid(sAt("dra"), "DRA()", "")},
			details: []string{"sdk.Trainium, sdk.EFA or sdk.GPU"},
		},
		{
			name:    "claim without a name",
			flow:    one(sdk.Claim("")),
			want:    field.ErrorList{field.Required(sAt("claims").Index(0), "")},
			details: []string{"ResourceClaimTemplate"},
		},
		{
			name: "claim naming no object",
			flow: one(sdk.Claim("Not_A_Name")),
			want: field.ErrorList{field.Invalid(sAt("claims").Index(0), "Not_A_Name", "")},
		},
		{
			name:    "GPU and EFA counts that do not pair",
			flow:    one(sdk.GPU(3), sdk.EFA(2), sdk.DRA()),
			want:    field.ErrorList{field.Invalid(sAt("efa"), 2, "")},
			details: []string{"one count must divide the other"},
		},
		{
			name: "AMD GPUs",
			flow: one(sdk.GPU(1), sdk.GPUVendor("amd"), sdk.DRA()),
			want: field.ErrorList{field.Invalid(sAt("gpuVendor"), "amd", "")},
		},
		{
			name: "a device class that is no object name",
			flow: one(sdk.GPU(1), sdk.DRA()),
			opts: compile.Options{Config: compile.Config{DeviceClasses: compile.ConfigDeviceClasses{GPU: "GPU class"}}},
			want: field.ErrorList{field.Invalid(field.NewPath("config", "device_classes", "gpu"), "GPU class", "")},
		},
	})
}
