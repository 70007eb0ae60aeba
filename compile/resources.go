package compile

import (
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/plan"
)

// Tolerations the accelerators need. EFA nodes carry no taint, so EFA adds none.
var (
	neuronToleration = plan.Toleration{Key: plan.ResourceNeuron, Operator: "Exists", Effect: "NoSchedule"}
	nvidiaToleration = plan.Toleration{Key: plan.ResourceNVIDIA, Operator: "Exists", Effect: "NoSchedule"}
	amdToleration    = plan.Toleration{Key: plan.ResourceAMD, Operator: "Exists", Effect: "NoSchedule"}
)

// neuronPrefix starts every Neuron resource name: neuron, neuroncore, neurondevice.
const neuronPrefix = "aws.amazon.com/neuron"

type resourceResult struct {
	neuron, efa, gpu int
	// efaAll is set when the EFA count is the instance type's, by sdk.EFAAll.
	efaAll           bool
	gpuResource      string
	sharedMemory     string
	requests, limits []plan.Quantity
	tolerations      []plan.Toleration
}

// count is an accelerator count and the field that set it.
type count struct {
	n  int64
	at *field.Path
}

// resources applies the accelerator rules: aliases, conflicts, the catalog, and the
// requests, limits and tolerations that follow from them.
func resources(r *resolved, gpuToleration bool) (resourceResult, field.ErrorList) {
	var out resourceResult
	var errs field.ErrorList

	for _, q := range []struct {
		v         val[string]
		name, how string
		limit     bool
	}{
		{r.cpu, "cpu", `cores such as "4" or "500m"`, false},
		{r.memory, "memory", `bytes such as "16Gi"`, true},
		{r.disk, "ephemeral-storage", `bytes such as "100Gi"`, false},
	} {
		if !q.v.set {
			continue
		}
		v, qErrs := quantity(q.v, q.how)
		errs = append(errs, qErrs...)
		if v == "" {
			continue
		}
		out.requests = append(out.requests, plan.Quantity{Name: q.name, Value: v})
		if q.limit {
			out.limits = append(out.limits, plan.Quantity{Name: q.name, Value: v})
		}
	}
	if r.sharedMemory.set {
		var shmErrs field.ErrorList
		out.sharedMemory, shmErrs = quantity(r.sharedMemory, `bytes such as "64Gi"`)
		errs = append(errs, shmErrs...)
	}

	// Neuron: Trainium, or its alias Inferentia.
	var neuron, efa, gpu count
	// Trainium and Inferentia are one setting: a step's own Inferentia replaces the
	// flow's Trainium default, but one layer giving both is an error.
	if r.trainium.set && r.inferentia.set {
		switch {
		case r.trainium.layer < r.inferentia.layer:
			r.inferentia = val[int]{}
		case r.inferentia.layer < r.trainium.layer:
			r.trainium = val[int]{}
		default:
			errs = append(errs, field.Forbidden(r.at.Child("inferentia"), "Inferentia is another name for Trainium (both ask aws.amazon.com/neuron devices): give one of them"))
		}
	}
	for _, v := range []struct {
		v    val[int]
		name string
	}{{r.inferentia, "Inferentia"}, {r.trainium, "Trainium"}} {
		if !v.v.set {
			continue
		}
		if v.v.v <= 0 {
			errs = append(errs, field.Invalid(v.v.at, v.v.v, fmt.Sprintf("must be a positive number of Neuron devices; to request none, leave out sdk.%s", v.name)))
			continue
		}
		neuron = count{int64(v.v.v), r.at.Child(strings.ToLower(v.name))}
	}

	// EFA, possibly every interface of the instance type.
	inst, known := catalog.Lookup(r.instanceType.v)
	if r.instanceType.set && !known {
		errs = append(errs, field.NotSupported(r.instanceType.at, r.instanceType.v, catalog.Types()))
	}
	switch {
	case r.efaAll.set && !r.instanceType.set:
		errs = append(errs, field.Required(r.at.Child("instanceType"), "sdk.EFAAll() takes the EFA count of the instance type: add sdk.InstanceType, or ask a count with sdk.EFA(n)"))
	case r.efaAll.set && known && inst.EFA == 0:
		errs = append(errs, field.Invalid(r.efaAll.at, "EFAAll()", fmt.Sprintf("%s has no EFA interfaces; leave out sdk.EFAAll", inst.Type)))
	case r.efaAll.set && known:
		efa = count{int64(inst.EFA), r.at.Child("efa")}
		out.efaAll = true
	case r.efa.set && r.efa.v <= 0:
		errs = append(errs, field.Invalid(r.efa.at, r.efa.v, "must be a positive number of EFA interfaces; to request none, leave out sdk.EFA"))
	case r.efa.set:
		efa = count{int64(r.efa.v), r.at.Child("efa")}
	}

	// GPUs. GPU(0) means none and conflicts with nothing.
	vendor := catalog.NVIDIA
	if known && inst.GPUs() > 0 {
		vendor = inst.Accelerator
	}
	if r.gpuVendor.set {
		switch r.gpuVendor.v {
		case catalog.NVIDIA, catalog.AMD:
			vendor = r.gpuVendor.v
		default:
			errs = append(errs, field.NotSupported(r.gpuVendor.at, r.gpuVendor.v, []string{catalog.NVIDIA, catalog.AMD}))
		}
	}
	if r.gpu.set {
		if r.gpu.v < 0 {
			errs = append(errs, field.Invalid(r.gpu.at, r.gpu.v, "must be 0 or more GPUs; GPU(0) or no sdk.GPU means none"))
		} else if r.gpu.v > 0 {
			gpu = count{int64(r.gpu.v), r.at.Child("gpu")}
		}
	}

	// Resource options: the accelerators' own names fold into the counts above (a
	// different count is an error); the rest are extended resources.
	var extended []plan.Quantity
	neuronOther := false
	for _, it := range r.resources {
		name, n := it.v.Name, it.v.Count
		errs = append(errs, checkResourceName(it.at, name)...)
		if n <= 0 {
			errs = append(errs, field.Invalid(it.at, n, "must be a positive count; to request none, leave out sdk.Resource"))
			continue
		}
		var into *count
		switch name {
		case plan.ResourceNeuron:
			into = &neuron
		case plan.ResourceEFA:
			into = &efa
		case plan.ResourceNVIDIA, plan.ResourceAMD:
			v := strings.TrimSuffix(name, ".com/gpu")
			if r.gpuVendor.set && r.gpuVendor.v != v {
				errs = append(errs, field.Invalid(it.at, name, fmt.Sprintf("conflicts with sdk.GPUVendor(%q)", r.gpuVendor.v)))
				continue
			}
			if gpu.n > 0 && v != vendor {
				errs = append(errs, field.Invalid(it.at, name, fmt.Sprintf("conflicts with sdk.GPU, which asks %s GPUs", vendor)))
				continue
			}
			vendor = v
			into = &gpu
		default:
			if strings.HasPrefix(name, neuronPrefix) {
				neuronOther = true
				if known && name == neuronPrefix+"core" && n > int64(inst.NeuronDevices()*inst.CoresPerDevice) {
					errs = append(errs, field.Invalid(it.at, n, fmt.Sprintf("%s has %d NeuronCores", inst.Type, inst.NeuronDevices()*inst.CoresPerDevice)))
				}
			}
			extended = append(extended, plan.Quantity{Name: name, Value: strconv.FormatInt(n, 10)})
			continue
		}
		switch {
		case into.n == 0:
			*into = count{n, it.at}
		case into.n != n:
			errs = append(errs, field.Invalid(it.at, n, fmt.Sprintf("conflicts with %s, which asks %d: give the count once", into.at, into.n)))
		}
	}

	if gpu.n > 0 && (neuron.n > 0 || neuronOther) {
		errs = append(errs, field.Forbidden(gpu.at, "a step asks Neuron devices or GPUs, not both; put them in separate steps"))
	}
	if neuron.n > 0 && neuronOther {
		errs = append(errs, field.Forbidden(neuron.at, "ask whole Neuron devices (sdk.Trainium) or another Neuron resource (NeuronCores), not both"))
	}

	// What the instance type has.
	if known {
		if neuron.n > 0 {
			switch d := inst.NeuronDevices(); {
			case d == 0:
				errs = append(errs, field.Invalid(neuron.at, neuron.n, fmt.Sprintf("%s has no Neuron devices; choose a trn or inf instance type", inst.Type)))
			case neuron.n > int64(d):
				errs = append(errs, field.Invalid(neuron.at, neuron.n, fmt.Sprintf("%s has %d Neuron devices", inst.Type, d)))
			}
		}
		if neuronOther && inst.NeuronDevices() == 0 {
			errs = append(errs, field.Invalid(r.instanceType.at, inst.Type, "has no Neuron devices, and the step asks a Neuron resource"))
		}
		if gpu.n > 0 {
			switch d := inst.GPUs(); {
			case d == 0:
				errs = append(errs, field.Invalid(gpu.at, gpu.n, fmt.Sprintf("%s has no GPUs; choose a GPU instance type such as p5.48xlarge", inst.Type)))
			case vendor != inst.Accelerator:
				errs = append(errs, field.Invalid(gpu.at, gpu.n, fmt.Sprintf("%s has %s GPUs, and the step asks %s", inst.Type, inst.Accelerator, vendor)))
			case gpu.n > int64(d):
				errs = append(errs, field.Invalid(gpu.at, gpu.n, fmt.Sprintf("%s has %d GPUs", inst.Type, d)))
			}
		}
		if efa.n > 0 && !r.efaAll.set {
			switch {
			case inst.EFA == 0:
				errs = append(errs, field.Invalid(efa.at, efa.n, fmt.Sprintf("%s has no EFA interfaces", inst.Type)))
			case efa.n > int64(inst.EFA):
				errs = append(errs, field.Invalid(efa.at, efa.n, fmt.Sprintf("%s has at most %d EFA interfaces", inst.Type, inst.EFA)))
			}
		}
	}

	out.neuron, out.efa, out.gpu = int(neuron.n), int(efa.n), int(gpu.n)
	if neuron.n > 0 {
		extended = append(extended, plan.Quantity{Name: plan.ResourceNeuron, Value: strconv.FormatInt(neuron.n, 10)})
	}
	if neuron.n > 0 || neuronOther {
		out.tolerations = append(out.tolerations, neuronToleration)
	}
	if efa.n > 0 {
		extended = append(extended, plan.Quantity{Name: plan.ResourceEFA, Value: strconv.FormatInt(efa.n, 10)})
	}
	if gpu.n > 0 {
		tol := nvidiaToleration
		out.gpuResource = plan.ResourceNVIDIA
		if vendor == catalog.AMD {
			tol, out.gpuResource = amdToleration, plan.ResourceAMD
		}
		extended = append(extended, plan.Quantity{Name: out.gpuResource, Value: strconv.FormatInt(gpu.n, 10)})
		if gpuToleration {
			out.tolerations = append(out.tolerations, tol)
		}
	}
	out.requests = sortQuantities(append(out.requests, extended...))
	out.limits = sortQuantities(append(out.limits, extended...))
	return out, errs
}

// checkResourceName accepts extended resource names: domain-prefixed, and not one
// of the standard resources that have options of their own.
func checkResourceName(at *field.Path, name string) field.ErrorList {
	if !strings.Contains(name, "/") {
		return field.ErrorList{field.Invalid(at, name, "an extended resource name has a domain prefix, such as example.com/fpga; use sdk.CPU, sdk.Memory and sdk.Disk for the standard resources")}
	}
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(name) {
		errs = append(errs, field.Invalid(at, name, msg))
	}
	if strings.HasPrefix(name, "kubernetes.io/") || strings.HasPrefix(name, "requests.") {
		errs = append(errs, field.Invalid(at, name, "not an extended resource name"))
	}
	return errs
}
