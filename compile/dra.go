package compile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// ConfigDeviceClasses names, in manifold.toml's [device_classes], the
// DeviceClasses that sdk.DRA claims devices from when a cluster's DRA drivers
// install others than the defaults (plan.DeviceClassNeuron, DeviceClassEFA,
// DeviceClassNVIDIA).
//
//	[device_classes]
//	neuron = "neuron.aws.com"
//	efa = "efa.networking.k8s.aws"
//	gpu = "gpu.nvidia.com"
type ConfigDeviceClasses struct {
	// Neuron is the DeviceClass of Neuron devices (default neuron.aws.com).
	Neuron string `toml:"neuron"`
	// EFA is the DeviceClass of EFA interfaces (default efa.networking.k8s.aws).
	EFA string `toml:"efa"`
	// GPU is the DeviceClass of NVIDIA GPUs (default gpu.nvidia.com).
	GPU string `toml:"gpu"`
}

// deviceClasses are the DeviceClasses of one compile.
type deviceClasses struct{ neuron, efa, gpu string }

// deviceClasses returns the config's device classes, the defaults where it names
// none, and what is wrong with those it names.
func (c ConfigDeviceClasses) deviceClasses() (deviceClasses, field.ErrorList) {
	out := deviceClasses{plan.DeviceClassNeuron, plan.DeviceClassEFA, plan.DeviceClassNVIDIA}
	var errs field.ErrorList
	at := field.NewPath("config", "device_classes")
	for _, it := range []struct {
		key, v string
		into   *string
	}{{"neuron", c.Neuron, &out.neuron}, {"efa", c.EFA, &out.efa}, {"gpu", c.GPU, &out.gpu}} {
		if it.v == "" {
			continue
		}
		*it.into = it.v
		errs = append(errs, checkObjectName(at.Child(it.key), it.v)...)
	}
	return out, errs
}

// dra applies sdk.DRA and sdk.Claim to step s. With DRA, the step's Neuron, EFA
// and GPU counts leave the container's requests and limits, and their tolerations
// leave res, and become the device requests of a generated ResourceClaimTemplate,
// co-located when they ask two kinds of device. A DRA default of the flow or
// config applies to the steps that ask such devices; on a step of its own it is an
// error where the step asks none.
func (e stepEnv) dra(r *resolved, s *plan.Step, res *resourceResult) field.ErrorList {
	var errs field.ErrorList
	d := &plan.DRA{}
	seen := map[string]bool{}
	for _, it := range r.claims {
		if it.v == "" {
			errs = append(errs, field.Required(it.at, "sdk.Claim names a ResourceClaimTemplate installed in the step's namespace, such as sdk.Claim(\"trn2-neuron-efa\")"))
			continue
		}
		errs = append(errs, checkObjectName(it.at, it.v)...)
		if !seen[it.v] {
			seen[it.v] = true
			d.Templates = append(d.Templates, it.v)
		}
	}

	if r.dra.set && r.dra.v {
		switch {
		case res.neuron == 0 && res.efa == 0 && res.gpu == 0:
			if r.dra.layer <= stepRank && !res.neuronRemoved.above(r.dra.layer) && !res.efaRemoved.above(r.dra.layer) {
				errs = append(errs, field.Invalid(r.dra.at, "DRA()", "sdk.DRA() claims the step's Neuron devices, EFA interfaces and GPUs, and it asks none: add sdk.Trainium, sdk.EFA or sdk.GPU, or leave out sdk.DRA"))
			}
		default:
			errs = append(errs, e.draRequests(r, s, res, d)...)
		}
	}
	if len(d.Requests) > 0 || len(d.Templates) > 0 {
		s.DRA = d
	}
	return errs
}

// draRequests fills d's device requests from the step's counts and takes those
// counts out of res's requests, limits and tolerations.
func (e stepEnv) draRequests(r *resolved, s *plan.Step, res *resourceResult, d *plan.DRA) field.ErrorList {
	var errs field.ErrorList
	if res.gpu > 0 && res.gpuResource != plan.ResourceNVIDIA {
		errs = append(errs, field.Invalid(r.at.Child("gpuVendor"), strings.TrimSuffix(res.gpuResource, ".com/gpu"),
			fmt.Sprintf("sdk.DRA claims NVIDIA GPUs (device class %s); claim other GPUs with sdk.Claim and a ResourceClaimTemplate of their driver, or leave out sdk.DRA", e.classes.gpu)))
	}
	request := func(name, class string, n int) {
		d.Requests = append(d.Requests, plan.DeviceRequest{Name: name, Class: class, Count: n})
	}
	switch {
	case res.gpu > 0 && res.efa > 0:
		// Each GPU beside the EFA interfaces under its PCIe root: as many pairs
		// of requests as the smaller count, each under one root.
		pairs := min(res.gpu, res.efa)
		if max(res.gpu, res.efa)%pairs != 0 {
			errs = append(errs, field.Invalid(r.at.Child("efa"), res.efa, fmt.Sprintf(
				"with sdk.DRA each group of GPUs is claimed with the EFA interfaces under its PCIe root (%s), so one count must divide the other: %d GPUs take 1, 2, 4 or 8 EFA interfaces each, say, or leave out sdk.DRA",
				plan.AttributePCIeRoot, res.gpu)))
			break
		}
		for i := range pairs {
			gpu, efa := fmt.Sprintf("%s-%d", plan.DeviceRequestGPU, i), fmt.Sprintf("%s-%d", plan.DeviceRequestEFA, i)
			request(gpu, e.classes.gpu, res.gpu/pairs)
			request(efa, e.classes.efa, res.efa/pairs)
			d.Constraints = append(d.Constraints, plan.DeviceConstraint{Requests: []string{gpu, efa}, MatchAttribute: plan.AttributePCIeRoot})
		}
	default:
		if res.neuron > 0 {
			request(plan.DeviceRequestNeuron, e.classes.neuron, res.neuron)
		}
		if res.efa > 0 {
			request(plan.DeviceRequestEFA, e.classes.efa, res.efa)
		}
		if res.gpu > 0 {
			request(plan.DeviceRequestGPU, e.classes.gpu, res.gpu)
		}
	}
	if res.neuron > 0 && res.efa > 0 {
		if !slices.Contains(plan.DeviceGroupSizes, res.neuron) {
			errs = append(errs, field.Invalid(res.neuronAt, res.neuron, fmt.Sprintf(
				"with sdk.DRA and EFA the claim keeps the Neuron devices beside their EFA interfaces by the attribute %sN_id, which the Neuron and EFA drivers publish only for groups of %s devices: ask one of those counts, or leave out sdk.EFA (or sdk.DRA, for device-plugin resources without co-location)",
				plan.AttributeDeviceGroupPrefix, sizes())))
		}
		d.Constraints = []plan.DeviceConstraint{{
			Requests:       []string{plan.DeviceRequestNeuron, plan.DeviceRequestEFA},
			MatchAttribute: plan.AttributeDeviceGroupPrefix + strconv.Itoa(res.neuron) + "_id",
		}}
	}

	// The claimed devices are no longer device-plugin resources, and the step
	// needs no toleration for them: the DRA driver's nodes are the claim's.
	claimed := map[string]bool{}
	if res.neuron > 0 {
		claimed[plan.ResourceNeuron] = true
	}
	if res.efa > 0 {
		claimed[plan.ResourceEFA] = true
	}
	if res.gpu > 0 {
		claimed[res.gpuResource] = true
	}
	drop := func(q plan.Quantity) bool { return claimed[q.Name] }
	res.requests = slices.DeleteFunc(res.requests, drop)
	res.limits = slices.DeleteFunc(res.limits, drop)
	s.Requests, s.Limits = res.requests, res.limits
	res.tolerations = slices.DeleteFunc(res.tolerations, func(t plan.Toleration) bool { return claimed[t.Key] })
	return errs
}

// sizes lists plan.DeviceGroupSizes as prose: "1, 4, 8 or 16".
func sizes() string {
	var s []string
	for _, n := range plan.DeviceGroupSizes {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
