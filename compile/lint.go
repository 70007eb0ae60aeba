package compile

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/plan"
)

// Warning is a flow that compiles but will likely not do what its author meant,
// such as training over TCP on a fabric that offers EFA. validate and compile
// print warnings; with --strict they are errors.
type Warning struct {
	// Field is the option's path, as in errors: steps[train].efa.
	Field string
	// Detail says what goes wrong and what to do.
	Detail string
}

func (w Warning) Error() string { return w.Field + ": " + w.Detail }

// Lint returns p's warnings, step by step: EFA that the pod will not use, and
// multi-node steps whose traffic takes the slow road.
func Lint(p *plan.Flow) []Warning {
	var out []Warning
	for i := range p.Steps {
		out = append(out, lintStep(&p.Steps[i])...)
	}
	return out
}

func lintStep(s *plan.Step) []Warning {
	at := field.NewPath("steps").Key(s.Name)
	var out []Warning
	warn := func(path *field.Path, format string, args ...any) {
		out = append(out, Warning{Field: path.String(), Detail: fmt.Sprintf(format, args...)})
	}
	provider, providerSet := ownEnv(s, envFIProvider)
	inst, known := catalog.Lookup(s.InstanceType)
	accelerated := s.Neuron > 0 || s.GPU > 0

	// Training over TCP on an instance made for EFA.
	if s.Nodes > 1 && accelerated && s.EFA == 0 && known && inst.EFA > 0 {
		warn(at.Child("efa"), "a %d-node step on %s asks for no EFA, so its nodes talk over TCP at a fraction of the fabric's bandwidth; add sdk.EFAAll() (all %d interfaces) and sdk.EFAWiring()",
			s.Nodes, s.InstanceType, inst.EFA)
	}
	// EFA in the pod that nothing tells libfabric to use.
	if s.EFA > 0 && s.EFAWiring == nil && !providerSet {
		warn(at.Child("efaWiring"), "the step asks for %d EFA interfaces but sets no %s: unless its image sets the EFA variables itself, libfabric and NCCL fall back to TCP without a word; add sdk.EFAWiring() (or set %s=efa and the rest with sdk.Env)",
			s.EFA, envFIProvider, envFIProvider)
	}
	// The EFA provider without a device to use.
	if providerSet && provider == "efa" && s.EFA == 0 {
		warn(at.Child("env").Key(envFIProvider), "%s=efa, but the step asks for no EFA interfaces: the pod has no EFA device, so libfabric fails or falls back to TCP; add sdk.EFA(n) or sdk.EFAAll(), or leave %s out",
			envFIProvider, envFIProvider)
	}
	// Nodes of families whose EFA does not interoperate.
	if s.Nodes > 1 && s.EFA > 0 && s.InstanceType == "" && !hasSelector(s, plan.LabelInstanceFamily) {
		warn(at.Child("instanceType"), "the %d nodes of an EFA step can be of any instance family, and EFA does not work between some of them (p4d and p4de with any other); pin one with sdk.InstanceType or a node selector on %s",
			s.Nodes, plan.LabelInstanceFamily)
	}
	return out
}

// ownEnv returns the value of the step's own plain variable name.
func ownEnv(s *plan.Step, name string) (string, bool) {
	for _, e := range s.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

func hasSelector(s *plan.Step, key string) bool {
	for _, kv := range s.NodeSelector {
		if kv.Key == key {
			return true
		}
	}
	return false
}
