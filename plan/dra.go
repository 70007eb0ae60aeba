package plan

// Device classes and attributes of Dynamic Resource Allocation (resource.k8s.io/v1)
// that sdk.DRA uses unless manifold.toml names other classes.
const (
	// DeviceClassNeuron is the Neuron DRA driver's class of Neuron devices.
	DeviceClassNeuron = "neuron.aws.com"
	// DeviceClassEFA is the EFA DRA driver's (DRANET's) class of EFA interfaces.
	DeviceClassEFA = "efa.networking.k8s.aws"
	// DeviceClassNVIDIA is NVIDIA's DRA driver's class of GPUs.
	DeviceClassNVIDIA = "gpu.nvidia.com"

	// AttributeDeviceGroupPrefix starts the attribute that the Neuron and EFA
	// drivers give every device of one group of N Neuron devices and the EFA
	// interfaces beside them: resource.aws.com/devicegroup<N>_id.
	AttributeDeviceGroupPrefix = "resource.aws.com/devicegroup"
	// AttributePCIeRoot is the PCIe root complex of a device, which GPU and EFA
	// drivers publish alike.
	AttributePCIeRoot = "resource.kubernetes.io/pcieRoot"

	// The names of the requests of a generated claim, one per kind of device.
	DeviceRequestNeuron = "neuron"
	DeviceRequestEFA    = "efa"
	DeviceRequestGPU    = "gpu"

	// ClaimDevices is the pod's name for the claim made from a step's generated
	// ResourceClaimTemplate; the claims of installed templates (sdk.Claim) are
	// ClaimInstalledPrefix and their position.
	ClaimDevices         = "devices"
	ClaimInstalledPrefix = "claim-"
)

// DeviceGroupSizes are the Neuron device counts that have a devicegroup
// attribute, and so the counts a claim can co-locate with EFA interfaces.
var DeviceGroupSizes = []int{1, 4, 8, 16}

// DRA is how a step's pods claim devices through Dynamic Resource Allocation.
type DRA struct {
	// Requests are the device requests of the step's generated
	// ResourceClaimTemplate: neuron, efa and gpu, or for GPUs with EFA the pairs
	// gpu-<i>, efa-<i>; empty when the step only claims from installed templates.
	Requests []DeviceRequest
	// Constraints keep devices of the generated claim together, each the devices
	// of its requests on one value of an attribute (constraints[].matchAttribute);
	// none when the claim asks one kind of device.
	Constraints []DeviceConstraint
	// Templates are installed ResourceClaimTemplates (sdk.Claim) the pods claim
	// from, in the order given.
	Templates []string
}

// DeviceConstraint makes the devices of Requests share one value of
// MatchAttribute.
type DeviceConstraint struct {
	Requests       []string
	MatchAttribute string
}

// DeviceRequest asks Count devices of a DeviceClass.
type DeviceRequest struct {
	// Name is the request's name within the claim: DeviceRequestNeuron,
	// DeviceRequestEFA or DeviceRequestGPU, with "-<i>" for the i-th pair of GPUs
	// and EFA interfaces under one PCIe root.
	Name  string
	Class string
	Count int
}
