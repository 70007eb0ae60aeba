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

// asked is what a step asks of the accelerators once its options have settled.
type asked struct {
	neuron, efa, gpu count
	// vendor makes the step's GPUs: catalog.NVIDIA or catalog.AMD.
	vendor string
	// efaAll is set when the EFA count is the instance type's, by sdk.EFAAll.
	efaAll bool
	// neuronOther is set when a Resource asks a Neuron resource other than whole
	// devices, such as NeuronCores.
	neuronOther bool
}

// resources applies the accelerator rules: aliases, conflicts, the catalog, and the
// requests, limits and tolerations that follow from them.
func resources(r *resolved, gpuToleration bool) (resourceResult, field.ErrorList) {
	var out resourceResult
	var a asked
	errs := out.standard(r)

	// Neuron devices: Trainium, or its alias Inferentia.
	neuronTop, neuronRemoved, neuronErrs := settle(r.neuron, "Neuron devices", r.name)
	errs = append(errs, neuronErrs...)
	for _, src := range neuronTop {
		errs = append(errs, fold(&a.neuron, src, r.at)...)
	}

	// The instance type, whose catalog figures the other counts are checked against.
	inst, known := catalog.Lookup(r.instanceType.v)
	if r.instanceType.set && !known {
		errs = append(errs, field.Invalid(r.instanceType.at, r.instanceType.v, catalog.NotAType(r.instanceType.v)))
	}
	efaRemoved, efaErrs := a.settleEFA(r, inst, known)
	errs = append(errs, efaErrs...)
	out.neuronRemoved, out.efaRemoved = neuronRemoved, efaRemoved
	out.efaAll = a.efaAll

	errs = append(errs, a.settleGPU(r, inst, known)...)
	extended, resErrs := a.resourceOptions(r, inst, known)
	errs = append(errs, resErrs...)
	errs = append(errs, a.conflicts()...)
	if known {
		errs = append(errs, a.fitNeuron(r, inst)...)
		errs = append(errs, a.fitGPU(inst)...)
		errs = append(errs, a.fitEFA(inst)...)
	}

	extended = append(extended, out.accelerators(a, gpuToleration)...)
	out.requests = sortQuantities(append(out.requests, extended...))
	out.limits = sortQuantities(append(out.limits, extended...))
	return out, errs
}

// standard sets the requests and limits of the standard resources (CPU, memory,
// disk; memory is also a limit) and the shared memory size, from the quantities the
// step gives.
func (out *resourceResult) standard(r *resolved) field.ErrorList {
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
	return errs
}

// settleEFA decides the EFA count: the one asked, or by sdk.EFAAll every interface
// of the instance type, which needs a type whose interfaces the catalog knows.
func (a *asked) settleEFA(r *resolved, inst catalog.Instance, known bool) (removal, field.ErrorList) {
	top, removed, errs := settle(r.efaCount, "EFA interfaces", r.name)
	for _, src := range top {
		if !src.all {
			errs = append(errs, fold(&a.efa, src, r.at)...)
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
			a.efaAll = true
			errs = append(errs, fold(&a.efa, source{opt: src.opt, n: int64(inst.EFA), at: src.at, layer: src.layer}, r.at)...)
		}
	}
	return removed, errs
}

// settleGPU decides the GPU vendor (sdk.GPUVendor, else the instance type's, else
// NVIDIA) and the count sdk.GPU asks. GPU(0) means none and conflicts with nothing.
func (a *asked) settleGPU(r *resolved, inst catalog.Instance, known bool) field.ErrorList {
	var errs field.ErrorList
	a.vendor = catalog.NVIDIA
	if known && inst.GPUs() > 0 {
		a.vendor = inst.Accelerator
	}
	if r.gpuVendor.set {
		switch r.gpuVendor.v {
		case catalog.NVIDIA, catalog.AMD:
			a.vendor = r.gpuVendor.v
		default:
			errs = append(errs, field.NotSupported(r.gpuVendor.at, r.gpuVendor.v, []string{catalog.NVIDIA, catalog.AMD}))
		}
	}
	if r.gpu.set {
		if r.gpu.v < 0 {
			errs = append(errs, field.Invalid(r.gpu.at, r.gpu.v, "must be 0 or more GPUs; GPU(0) or no sdk.GPU means none"))
		} else if r.gpu.v > 0 {
			a.gpu = count{int64(r.gpu.v), r.at.Child("gpu")}
		}
	}
	return errs
}

// resourceOptions reads the Resource options: the GPU resource names fold into the
// GPU count (a different count is an error); the rest, Neuron resources among them,
// are extended resources, returned in the order given.
func (a *asked) resourceOptions(r *resolved, inst catalog.Instance, known bool) ([]plan.Quantity, field.ErrorList) {
	var extended []plan.Quantity
	var errs field.ErrorList
	for _, it := range r.resources {
		name, n := it.v.Name, it.v.Count
		errs = append(errs, checkResourceName(it.at, name)...)
		if n <= 0 {
			errs = append(errs, field.Invalid(it.at, n, "must be a positive count; to request none, leave out sdk.Resource"))
			continue
		}
		if name != plan.ResourceNVIDIA && name != plan.ResourceAMD {
			errs = append(errs, a.neuronResource(it.at, name, n, inst, known)...)
			extended = append(extended, plan.Quantity{Name: name, Value: strconv.FormatInt(n, 10)})
			continue
		}
		errs = append(errs, a.foldGPUResource(r, it.at, name, n)...)
	}
	return extended, errs
}

// neuronResource notes a Resource of a Neuron name other than whole devices, and
// checks that NeuronCores asked fit the instance type.
func (a *asked) neuronResource(at *field.Path, name string, n int64, inst catalog.Instance, known bool) field.ErrorList {
	if !strings.HasPrefix(name, neuronPrefix) {
		return nil
	}
	a.neuronOther = true
	if known && name == neuronPrefix+"core" && n > int64(inst.NeuronDevices()*inst.CoresPerDevice) {
		return field.ErrorList{field.Invalid(at, n, fmt.Sprintf("%s has %d NeuronCores", inst.Type, inst.NeuronDevices()*inst.CoresPerDevice))}
	}
	return nil
}

// foldGPUResource folds a Resource of a GPU name into the GPU count: its vendor must
// agree with sdk.GPUVendor and with the GPUs already asked, and its count with theirs.
func (a *asked) foldGPUResource(r *resolved, at *field.Path, name string, n int64) field.ErrorList {
	v := strings.TrimSuffix(name, ".com/gpu")
	if r.gpuVendor.set && r.gpuVendor.v != v {
		return field.ErrorList{field.Invalid(at, name, fmt.Sprintf("conflicts with sdk.GPUVendor(%q)", r.gpuVendor.v))}
	}
	if a.gpu.n > 0 && v != a.vendor {
		return field.ErrorList{field.Invalid(at, name, fmt.Sprintf("conflicts with sdk.GPU, which asks %s GPUs", a.vendor))}
	}
	a.vendor = v
	switch {
	case a.gpu.n == 0:
		a.gpu = count{n, at}
	case a.gpu.n != n:
		return field.ErrorList{field.Invalid(at, n, fmt.Sprintf("conflicts with %s, which asks %d: give the count once", a.gpu.at, a.gpu.n))}
	}
	return nil
}

// conflicts forbids asking GPUs together with Neuron resources, and whole Neuron
// devices together with another Neuron resource.
func (a *asked) conflicts() field.ErrorList {
	var errs field.ErrorList
	if a.gpu.n > 0 && (a.neuron.n > 0 || a.neuronOther) {
		errs = append(errs, field.Forbidden(a.gpu.at, "a step asks Neuron devices or GPUs, not both; put them in separate steps"))
	}
	if a.neuron.n > 0 && a.neuronOther {
		errs = append(errs, field.Forbidden(a.neuron.at, "ask whole Neuron devices (sdk.Trainium) or another Neuron resource (NeuronCores), not both"))
	}
	return errs
}

// fitNeuron checks the Neuron devices and resources asked against what the
// instance type has, where the catalog knows it.
func (a *asked) fitNeuron(r *resolved, inst catalog.Instance) field.ErrorList {
	if !inst.NeuronKnown() {
		return nil
	}
	var errs field.ErrorList
	if a.neuron.n > 0 {
		switch d := inst.NeuronDevices(); {
		case d == 0:
			errs = append(errs, field.Invalid(a.neuron.at, a.neuron.n, fmt.Sprintf("%s has no Neuron devices; %s", inst.Type, holders(a.neuron.n, catalog.WithNeuron(int(a.neuron.n))))))
		case a.neuron.n > int64(d):
			errs = append(errs, field.Invalid(a.neuron.at, a.neuron.n, fmt.Sprintf("%s has %d Neuron devices", inst.Type, d)))
		}
	}
	if a.neuronOther && inst.NeuronDevices() == 0 {
		errs = append(errs, field.Invalid(r.instanceType.at, inst.Type, "has no Neuron devices, and the step asks a Neuron resource"))
	}
	return errs
}

// fitGPU checks the GPUs asked, their count and vendor, against what the instance
// type has, where the catalog knows it.
func (a *asked) fitGPU(inst catalog.Instance) field.ErrorList {
	if !inst.GPUsKnown() || a.gpu.n <= 0 {
		return nil
	}
	switch d := inst.GPUs(); {
	case d == 0:
		return field.ErrorList{field.Invalid(a.gpu.at, a.gpu.n, fmt.Sprintf("%s has no GPUs; %s", inst.Type, holders(a.gpu.n, catalog.WithGPUs(a.vendor, int(a.gpu.n)))))}
	case a.vendor != inst.Accelerator:
		return field.ErrorList{field.Invalid(a.gpu.at, a.gpu.n, fmt.Sprintf("%s has %s GPUs, and the step asks %s", inst.Type, inst.Accelerator, a.vendor))}
	case a.gpu.n > int64(d):
		return field.ErrorList{field.Invalid(a.gpu.at, a.gpu.n, fmt.Sprintf("%s has %d GPUs", inst.Type, d))}
	}
	return nil
}

// fitEFA checks an EFA count asked against what the instance type has, where the
// catalog knows it; sdk.EFAAll's count is the type's own, so it always fits.
func (a *asked) fitEFA(inst catalog.Instance) field.ErrorList {
	if !inst.EFAKnown() || a.efa.n <= 0 || a.efaAll {
		return nil
	}
	switch {
	case inst.EFA == 0:
		return field.ErrorList{field.Invalid(a.efa.at, a.efa.n, fmt.Sprintf("%s has no EFA interfaces", inst.Type))}
	case a.efa.n > int64(inst.EFA):
		return field.ErrorList{field.Invalid(a.efa.at, a.efa.n, fmt.Sprintf("%s has at most %d EFA interfaces", inst.Type, inst.EFA))}
	}
	return nil
}

// accelerators records the accelerator counts asked and the tolerations they need,
// and returns the extended resources they request: Neuron devices, EFA interfaces
// and GPUs. The GPU taint is tolerated only when gpuToleration is set.
func (out *resourceResult) accelerators(a asked, gpuToleration bool) []plan.Quantity {
	var extended []plan.Quantity
	out.neuron, out.efa, out.gpu = int(a.neuron.n), int(a.efa.n), int(a.gpu.n)
	out.neuronAt = a.neuron.at
	if a.neuron.n > 0 {
		extended = append(extended, plan.Quantity{Name: plan.ResourceNeuron, Value: strconv.FormatInt(a.neuron.n, 10)})
	}
	if a.neuron.n > 0 || a.neuronOther {
		out.tolerations = append(out.tolerations, neuronToleration)
	}
	if a.efa.n > 0 {
		extended = append(extended, plan.Quantity{Name: plan.ResourceEFA, Value: strconv.FormatInt(a.efa.n, 10)})
	}
	if a.gpu.n > 0 {
		tol := nvidiaToleration
		out.gpuResource = plan.ResourceNVIDIA
		if a.vendor == catalog.AMD {
			tol, out.gpuResource = amdToleration, plan.ResourceAMD
		}
		extended = append(extended, plan.Quantity{Name: out.gpuResource, Value: strconv.FormatInt(a.gpu.n, 10)})
		if gpuToleration {
			out.tolerations = append(out.tolerations, tol)
		}
	}
	return extended
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
