package sdk

import "fmt"

// Compile-time checks that the fabric options implement the levels they document.
var (
	_ Option = dra{}
	_ Option = claim("")
)

// DRA claims the step's Neuron devices, EFA interfaces and GPUs through Dynamic
// Resource Allocation (resource.k8s.io/v1) instead of device-plugin resources:
// they become one generated ResourceClaimTemplate whose devices share a topology
// group (Neuron with EFA by resource.aws.com/devicegroup<N>_id, GPUs with EFA by
// resource.kubernetes.io/pcieRoot). Every pod of the step, every node of a
// multi-node step included, gets a claim of its own. The step must ask for
// Neuron devices, EFA or GPUs; DRA given as the flow's default leaves the steps
// that ask none (or take the default's devices away with Trainium(0) and EFA(0))
// be, as does a step's own DRA whose devices --set takes away.
func DRA() Option { return dra{} }

type dra struct{}

func (o dra) applyStep(s *StepSpec) { s.DRA = new(true) }
func (o dra) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o dra) String() string        { return "DRA()" }

// Claim gives the step's pods a claim made from the ResourceClaimTemplate template
// that the cluster's platform team installed in the step's namespace. Repeated
// Claim options add templates.
func Claim(template string) Option { return claim(template) }

type claim string

func (o claim) applyStep(s *StepSpec) { s.Claims = append(s.Claims, string(o)) }
func (o claim) applyFlow(f *FlowSpec) { o.applyStep(&f.Defaults) }
func (o claim) String() string        { return fmt.Sprintf("Claim(%q)", string(o)) }
