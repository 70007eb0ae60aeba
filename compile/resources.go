package compile

import (
	"fmt"
	"slices"
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
	efaAll bool
	// neuronAt is where the Neuron count was given, for errors about it.
	neuronAt *field.Path
	// neuronRemoved and efaRemoved say where a 0 took away a lower layer's
	// devices.
	neuronRemoved, efaRemoved removal
	gpuResource               string
	sharedMemory              string
	requests, limits          []plan.Quantity
	tolerations               []plan.Toleration
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

	// Neuron: Trainium, or its alias Inferentia, or a Resource of its name.
	neuronTop, neuronRemoved, neuronErrs := settle(r.neuron, "Neuron devices", r.name)
	errs = append(errs, neuronErrs...)
	var neuron, efa, gpu count
	for _, src := range neuronTop {
		errs = append(errs, fold(&neuron, src, r.at)...)
	}

	// EFA, possibly every interface of the instance type.
	inst, known := catalog.Lookup(r.instanceType.v)
	if r.instanceType.set && !known {
		errs = append(errs, field.Invalid(r.instanceType.at, r.instanceType.v, catalog.NotAType(r.instanceType.v)))
	}
	efaTop, efaRemoved, efaErrs := settle(r.efaCount, "EFA interfaces", r.name)
	errs = append(errs, efaErrs...)
	for _, src := range efaTop {
		if !src.all {
			errs = append(errs, fold(&efa, src, r.at)...)
			continue
		}
		switch {
		case !r.instanceType.set:
			errs = append(errs, field.Required(r.at.Child("instanceType"), "sdk.EFAAll() takes the EFA count of the instance type: add sdk.InstanceType, or ask a count with sdk.EFA(n)"))
		case known && !inst.EFAKnown():
			errs = append(errs, field.Invalid(src.at, "EFAAll()", fmt.Sprintf("the catalog does not know how many EFA interfaces %s has; ask a count with sdk.EFA(n), or add the type to catalog/catalog.go", inst.Type)))
		case known && inst.EFA == 0:
			errs = append(errs, field.Invalid(src.at, "EFAAll()", fmt.Sprintf("%s has no EFA interfaces; leave out sdk.EFAAll", inst.Type)))
		case known:
			out.efaAll = true
			errs = append(errs, fold(&efa, source{opt: src.opt, n: int64(inst.EFA), at: src.at, layer: src.layer}, r.at)...)
		}
	}
	out.neuronRemoved, out.efaRemoved = neuronRemoved, efaRemoved

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

	// What the instance type has, where the catalog knows it.
	if known && inst.NeuronKnown() {
		if neuron.n > 0 {
			switch d := inst.NeuronDevices(); {
			case d == 0:
				errs = append(errs, field.Invalid(neuron.at, neuron.n, fmt.Sprintf("%s has no Neuron devices; %s", inst.Type, holders(neuron.n, catalog.WithNeuron(int(neuron.n))))))
			case neuron.n > int64(d):
				errs = append(errs, field.Invalid(neuron.at, neuron.n, fmt.Sprintf("%s has %d Neuron devices", inst.Type, d)))
			}
		}
		if neuronOther && inst.NeuronDevices() == 0 {
			errs = append(errs, field.Invalid(r.instanceType.at, inst.Type, "has no Neuron devices, and the step asks a Neuron resource"))
		}
	}
	if known && inst.GPUsKnown() {
		if gpu.n > 0 {
			switch d := inst.GPUs(); {
			case d == 0:
				errs = append(errs, field.Invalid(gpu.at, gpu.n, fmt.Sprintf("%s has no GPUs; %s", inst.Type, holders(gpu.n, catalog.WithGPUs(vendor, int(gpu.n))))))
			case vendor != inst.Accelerator:
				errs = append(errs, field.Invalid(gpu.at, gpu.n, fmt.Sprintf("%s has %s GPUs, and the step asks %s", inst.Type, inst.Accelerator, vendor)))
			case gpu.n > int64(d):
				errs = append(errs, field.Invalid(gpu.at, gpu.n, fmt.Sprintf("%s has %d GPUs", inst.Type, d)))
			}
		}
	}
	if known && inst.EFAKnown() {
		if efa.n > 0 && !out.efaAll {
			switch {
			case inst.EFA == 0:
				errs = append(errs, field.Invalid(efa.at, efa.n, fmt.Sprintf("%s has no EFA interfaces", inst.Type)))
			case efa.n > int64(inst.EFA):
				errs = append(errs, field.Invalid(efa.at, efa.n, fmt.Sprintf("%s has at most %d EFA interfaces", inst.Type, inst.EFA)))
			}
		}
	}

	out.neuron, out.efa, out.gpu = int(neuron.n), int(efa.n), int(gpu.n)
	out.neuronAt = neuron.at
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

// holders says which instance types of the catalog have n of the devices asked,
// for an error about a type that has none.
func holders(n int64, types []string) string {
	if len(types) == 0 {
		return fmt.Sprintf("choose an instance type with %d (the catalog's table lists none)", n)
	}
	return fmt.Sprintf("%d are on %s: choose one of them", n, strings.Join(types, ", "))
}

// A removal is where a 0 took away the devices a lower layer asked (a step's
// Trainium(0) under a flow's Trainium(16)); the zero value is none.
type removal struct {
	done  bool
	layer int
}

// above reports whether the removal was made at a higher layer than rank: an
// option given at rank that needs the devices then lapses with them.
func (m removal) above(rank int) bool { return m.done && m.layer < rank }

// settle returns what the highest layer that speaks of a device count says
// (several sources when that layer gives several options for it). Lower layers are
// defaults that it replaces. A 0 there means none: it takes away a count that a
// lower layer asks, and is an error where there is none to take away, as is a
// negative count. step names the step, for errors about --set.
func settle(srcs []source, what, step string) ([]source, removal, field.ErrorList) {
	if len(srcs) == 0 {
		return nil, removal{}, nil
	}
	top := srcs[0].layer
	var given, zeros []source
	below := false
	for _, src := range srcs {
		switch {
		case src.layer != top:
			below = below || src.all || src.n > 0
		case src.all || src.n > 0:
			given = append(given, src)
		default:
			zeros = append(zeros, src)
		}
	}
	if len(given) == 0 && below && !slices.ContainsFunc(zeros, func(s source) bool { return s.n < 0 }) {
		return nil, removal{done: true, layer: top}, nil
	}
	var errs field.ErrorList
	for _, z := range zeros {
		detail := fmt.Sprintf("must be a positive number of %s; to request none, leave out sdk.%s", what, z.opt)
		switch {
		case z.n == 0 && z.layer == overrideRank && z.opt != "Resource":
			detail = fmt.Sprintf("the step asks no %s for --set %s.%s=0 to take away; leave that --set out", what, step, strings.ToLower(z.opt))
		case z.n == 0:
			detail += fmt.Sprintf(" (%s(0) means none only over a count that the flow's defaults, or under --set the step's code, ask)", z.opt)
		}
		errs = append(errs, field.Invalid(z.at, z.n, detail))
	}
	// Trainium and Inferentia are one setting: one layer may give only one of them.
	if i := slices.IndexFunc(given, func(s source) bool { return s.opt == "Inferentia" }); i >= 0 &&
		slices.ContainsFunc(given, func(s source) bool { return s.opt == "Trainium" }) {
		errs = append(errs, field.Forbidden(given[i].at, "Inferentia is another name for Trainium (both ask aws.amazon.com/neuron devices): give one of them"))
		given = slices.DeleteFunc(given, func(s source) bool { return s.opt == "Inferentia" })
	}
	return given, removal{}, errs
}

// fold adds src to c: the first count given sets it, and a later one must agree.
// An option's count is at the step's field of its name (so that errors about the
// instance type point at the step); a Resource's at its own path.
func fold(c *count, src source, step *field.Path) field.ErrorList {
	at := src.at
	switch src.opt {
	case "Trainium", "Inferentia", "EFA", "EFAAll":
		at = step.Child(strings.ToLower(strings.TrimSuffix(src.opt, "All")))
	}
	switch {
	case c.n == 0:
		*c = count{src.n, at}
	case c.n != src.n:
		return field.ErrorList{field.Invalid(src.at, src.n, fmt.Sprintf("conflicts with %s, which asks %d: give the count once", c.at, c.n))}
	}
	return nil
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
