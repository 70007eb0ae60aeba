// Package catalog knows the EC2 instance types: every name EC2 has (the AWS SDK's
// list, in ec2types_gen.go, written by tools/ec2types) and, for the accelerator
// types of its table, the accelerators and EFA interfaces each has. The compiler
// checks a step's requests against it; the simulated cluster shapes its fake nodes
// from it. To give an instance type its figures, add a row to the table.
package catalog

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/manifoldflow/manifold/internal/suggest"
)

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
	// Listed is true for the types of the table, whose figures above are AWS's.
	// Any other EC2 type has only Type and Family, and the catalog knows no more
	// of it than NeuronKnown, GPUsKnown and EFAKnown say.
	Listed bool
}

// NeuronKnown reports whether NeuronDevices is the instance's real count: for
// the table's types, and for every type outside the Trainium and Inferentia
// families, which has no Neuron devices.
func (i Instance) NeuronKnown() bool { return i.Listed || !neuronFamily(i.Family) }

// GPUsKnown reports whether GPUs is the instance's real count: for the table's
// types, and for every type outside the GPU families (g and p), which has none.
func (i Instance) GPUsKnown() bool { return i.Listed || !gpuFamily(i.Family) }

// EFAKnown reports whether EFA is the instance's real maximum: for the table's
// types only, as many other types (c5n, m7i.48xlarge, …) have EFA interfaces too.
func (i Instance) EFAKnown() bool { return i.Listed }

// neuronFamily reports whether the types of family f may have Neuron devices.
func neuronFamily(f string) bool {
	return strings.HasPrefix(f, "trn") || strings.HasPrefix(f, "inf")
}

// gpuFamily reports whether the types of family f may have GPUs: g4dn, g5, gr6,
// p4d, p6-b200 and the like.
func gpuFamily(f string) bool {
	return len(f) > 1 && (f[0] == 'g' || f[0] == 'p') && (f[1] == 'r' || f[1] >= '0' && f[1] <= '9')
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

// table holds the figures of AWS.md (devices, cores, maximum EFA interfaces);
// every row is Listed.
var table = []Instance{
	{"trn1.2xlarge", "trn1", Neuron, "Trainium", 1, 2, 0, true},
	{"trn1.32xlarge", "trn1", Neuron, "Trainium", 16, 2, 8, true},
	{"trn1n.32xlarge", "trn1n", Neuron, "Trainium", 16, 2, 16, true},
	{"trn2.48xlarge", "trn2", Neuron, "Trainium2", 16, 8, 16, true},
	{"trn2u.48xlarge", "trn2u", Neuron, "Trainium2", 16, 8, 16, true},
	{"inf1.xlarge", "inf1", Neuron, "Inferentia", 1, 4, 0, true},
	{"inf1.2xlarge", "inf1", Neuron, "Inferentia", 1, 4, 0, true},
	{"inf1.6xlarge", "inf1", Neuron, "Inferentia", 4, 4, 0, true},
	{"inf1.24xlarge", "inf1", Neuron, "Inferentia", 16, 4, 1, true},
	{"inf2.xlarge", "inf2", Neuron, "Inferentia2", 1, 2, 0, true},
	{"inf2.8xlarge", "inf2", Neuron, "Inferentia2", 1, 2, 0, true},
	{"inf2.24xlarge", "inf2", Neuron, "Inferentia2", 6, 2, 0, true},
	{"inf2.48xlarge", "inf2", Neuron, "Inferentia2", 12, 2, 0, true},
	{"p4d.24xlarge", "p4d", NVIDIA, "A100", 8, 0, 4, true},
	{"p4de.24xlarge", "p4de", NVIDIA, "A100", 8, 0, 4, true},
	{"p5.48xlarge", "p5", NVIDIA, "H100", 8, 0, 32, true},
	{"p5e.48xlarge", "p5e", NVIDIA, "H200", 8, 0, 32, true},
	{"p5en.48xlarge", "p5en", NVIDIA, "H200", 8, 0, 16, true},
	{"p6-b200.48xlarge", "p6-b200", NVIDIA, "B200", 8, 0, 8, true},
	{"g7e.2xlarge", "g7e", NVIDIA, "RTX PRO 6000", 1, 0, 0, true},
	{"g7e.4xlarge", "g7e", NVIDIA, "RTX PRO 6000", 1, 0, 0, true},
	{"g7e.8xlarge", "g7e", NVIDIA, "RTX PRO 6000", 1, 0, 1, true},
	{"g7e.12xlarge", "g7e", NVIDIA, "RTX PRO 6000", 2, 0, 1, true},
	{"g7e.24xlarge", "g7e", NVIDIA, "RTX PRO 6000", 4, 0, 2, true},
	{"g7e.48xlarge", "g7e", NVIDIA, "RTX PRO 6000", 8, 0, 4, true},
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

// Lookup returns instance type t and whether t is an EC2 instance type: the
// table's figures for its types, and for any other EC2 type an Instance with only
// Type and Family (not Listed).
func Lookup(t string) (Instance, bool) {
	if i, ok := byType[t]; ok {
		return i, true
	}
	if _, ok := slices.BinarySearch(ec2Types, t); !ok {
		return Instance{}, false
	}
	family, _, _ := strings.Cut(t, ".")
	return Instance{Type: t, Family: family}, true
}

// EC2Types returns every EC2 instance type, sorted, as the AWS SDK for Go
// lists them; SDKVersion names that SDK's version.
func EC2Types() []string { return slices.Clone(ec2Types) }

// SDKVersion is the version of github.com/aws/aws-sdk-go-v2/service/ec2 whose
// instance types the catalog holds.
func SDKVersion() string { return ec2Version }

// NotAType is the detail of an error about t, which is no EC2 instance type
// (Lookup finds nothing): the nearest real types, or where to find the names.
func NotAType(t string) string {
	if near := Nearest(t); len(near) > 0 {
		return fmt.Sprintf("%q is not an EC2 instance type; did you mean %s?", t, orList(near))
	}
	return fmt.Sprintf("%q is not an EC2 instance type; give its API name, such as m7i.8xlarge or trn1.32xlarge (aws ec2 describe-instance-types lists them)", t)
}

// Nearest returns the EC2 instance types most like t, the best first: the
// type written in lower case, or the types one edit (a letter added, dropped or
// changed) away when there are any,
// else those at least 0.85 similar to t by the Jaro-Winkler measure that the
// command line's suggestions use; at most three, none when no type is that near.
func Nearest(t string) []string {
	const (
		most      = 3
		threshold = 0.85
	)
	type scored struct {
		name  string
		slip  bool
		score float64
	}
	w := strings.ToLower(t)
	if _, ok := slices.BinarySearch(ec2Types, w); ok {
		return []string{w}
	}
	var near []scored
	slips := false
	for _, c := range ec2Types {
		if s := suggest.Similarity(w, c); s >= threshold {
			slip := suggest.Edits(w, c) <= 1
			slips = slips || slip
			near = append(near, scored{c, slip, s})
		}
	}
	if slips {
		near = slices.DeleteFunc(near, func(s scored) bool { return !s.slip })
	}
	// Best first; among equals, the newer generation (the higher name) first.
	slices.SortStableFunc(near, func(a, b scored) int {
		if a.score != b.score {
			if a.score > b.score {
				return -1
			}
			return 1
		}
		return strings.Compare(b.name, a.name)
	})
	var out []string
	for _, s := range near[:min(len(near), most)] {
		out = append(out, s.name)
	}
	return out
}

// WithNeuron returns the table's types with at least n Neuron devices, in
// table order.
func WithNeuron(n int) []string {
	return holding(func(i Instance) bool { return i.NeuronDevices() >= n })
}

// WithGPUs returns the table's types with at least n GPUs of vendor (NVIDIA or
// AMD), in table order.
func WithGPUs(vendor string, n int) []string {
	return holding(func(i Instance) bool { return i.Accelerator == vendor && i.GPUs() >= n })
}

func holding(ok func(Instance) bool) []string {
	var out []string
	for _, i := range table {
		if ok(i) {
			out = append(out, i.Type)
		}
	}
	return out
}

// orList joins "a", "a or b", "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Types returns the types of the table (those whose accelerator and EFA
// figures the catalog has), sorted.
func Types() []string {
	out := make([]string, 0, len(table))
	for _, i := range table {
		out = append(out, i.Type)
	}
	sort.Strings(out)
	return out
}

// All returns the table's instances, in table order.
func All() []Instance { return append([]Instance(nil), table...) }
