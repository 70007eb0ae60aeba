// Package catalog lists the EC2 instance types Manifold knows, with the accelerators
// and EFA interfaces each has. The compiler checks a step's requests against it; the
// simulated cluster shapes its fake nodes from it. To add an instance type, add a row
// to the table.
package catalog

import "sort"

// Accelerator vendors and kinds.
const (
	Neuron = "neuron" // AWS Trainium and Inferentia devices (aws.amazon.com/neuron)
	NVIDIA = "nvidia"
	AMD    = "amd"
)

// Instance is one EC2 instance type.
type Instance struct {
	// Type is the EC2 name, as in the node label node.kubernetes.io/instance-type.
	Type string
	// Family is the instance family (karpenter.k8s.aws/instance-family).
	Family string
	// Accelerator is Neuron, NVIDIA, AMD or "" for none.
	Accelerator string
	// Model names the accelerator ("Trainium2", "H100").
	Model string
	// Devices is the number of accelerator devices (Neuron devices or GPUs).
	Devices int
	// CoresPerDevice is the number of NeuronCores per Neuron device (0 for GPUs).
	CoresPerDevice int
	// EFA is the maximum number of EFA interfaces.
	EFA int
}

// NeuronDevices returns the instance's Neuron devices, 0 if it has none.
func (i Instance) NeuronDevices() int {
	if i.Accelerator != Neuron {
		return 0
	}
	return i.Devices
}

// GPUs returns the instance's GPUs, 0 if it has none.
func (i Instance) GPUs() int {
	if i.Accelerator == Neuron {
		return 0
	}
	return i.Devices
}

// table holds the figures of AWS.md (devices, cores, maximum EFA interfaces).
var table = []Instance{
	{"trn1.2xlarge", "trn1", Neuron, "Trainium", 1, 2, 0},
	{"trn1.32xlarge", "trn1", Neuron, "Trainium", 16, 2, 8},
	{"trn1n.32xlarge", "trn1n", Neuron, "Trainium", 16, 2, 16},
	{"trn2.48xlarge", "trn2", Neuron, "Trainium2", 16, 8, 16},
	{"trn2u.48xlarge", "trn2u", Neuron, "Trainium2", 16, 8, 16},
	{"inf1.xlarge", "inf1", Neuron, "Inferentia", 1, 4, 0},
	{"inf1.2xlarge", "inf1", Neuron, "Inferentia", 1, 4, 0},
	{"inf1.6xlarge", "inf1", Neuron, "Inferentia", 4, 4, 0},
	{"inf1.24xlarge", "inf1", Neuron, "Inferentia", 16, 4, 1},
	{"inf2.xlarge", "inf2", Neuron, "Inferentia2", 1, 2, 0},
	{"inf2.8xlarge", "inf2", Neuron, "Inferentia2", 1, 2, 0},
	{"inf2.24xlarge", "inf2", Neuron, "Inferentia2", 6, 2, 0},
	{"inf2.48xlarge", "inf2", Neuron, "Inferentia2", 12, 2, 0},
	{"p4d.24xlarge", "p4d", NVIDIA, "A100", 8, 0, 4},
	{"p4de.24xlarge", "p4de", NVIDIA, "A100", 8, 0, 4},
	{"p5.48xlarge", "p5", NVIDIA, "H100", 8, 0, 32},
	{"p5e.48xlarge", "p5e", NVIDIA, "H200", 8, 0, 32},
	{"p5en.48xlarge", "p5en", NVIDIA, "H200", 8, 0, 16},
	{"p6-b200.48xlarge", "p6-b200", NVIDIA, "B200", 8, 0, 8},
	{"g7e.2xlarge", "g7e", NVIDIA, "RTX PRO 6000", 1, 0, 0},
	{"g7e.4xlarge", "g7e", NVIDIA, "RTX PRO 6000", 1, 0, 0},
	{"g7e.8xlarge", "g7e", NVIDIA, "RTX PRO 6000", 1, 0, 1},
	{"g7e.12xlarge", "g7e", NVIDIA, "RTX PRO 6000", 2, 0, 1},
	{"g7e.24xlarge", "g7e", NVIDIA, "RTX PRO 6000", 4, 0, 2},
	{"g7e.48xlarge", "g7e", NVIDIA, "RTX PRO 6000", 8, 0, 4},
}

var byType = func() map[string]Instance {
	m := make(map[string]Instance, len(table))
	for _, i := range table {
		if _, dup := m[i.Type]; dup {
			panic("catalog: duplicate instance type " + i.Type)
		}
		m[i.Type] = i
	}
	return m
}()

// Lookup returns the instance type t and whether the catalog knows it.
func Lookup(t string) (Instance, bool) {
	i, ok := byType[t]
	return i, ok
}

// Types returns every known instance type, sorted.
func Types() []string {
	out := make([]string, 0, len(table))
	for _, i := range table {
		out = append(out, i.Type)
	}
	sort.Strings(out)
	return out
}

// All returns every known instance, in table order.
func All() []Instance { return append([]Instance(nil), table...) }
