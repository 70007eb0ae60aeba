package compile

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// The variables EFA wiring sets; the lint reads some of them in a step's own
// environment.
const (
	envFIProvider = "FI_PROVIDER"
	envLibPath    = "LD_LIBRARY_PATH"
	envPath       = "PATH"
)

// capIPCLock lets libfabric pin the memory it registers with the EFA device.
const capIPCLock = "IPC_LOCK"

// archNames maps what sdk.EFAArch accepts to the architecture's name in the EFA
// installer's library directories.
var archNames = map[string]string{
	plan.ArchX86: plan.ArchX86, "amd64": plan.ArchX86,
	plan.ArchARM: plan.ArchARM, "arm64": plan.ArchARM,
}

// wiring sets s.EFAWiring from sdk.EFAWiring and sdk.EFAArch. It reads the
// step's EFA and Neuron counts, so it runs after resources. Wiring given on the
// step itself needs EFA; given on the flow or in the config it wires the steps
// that ask for EFA and leaves the others be, and so does the step's own wiring
// when a higher layer (--set) took its EFA away with a 0 (efaRemoved).
func wiring(r *resolved, s *plan.Step, efaRemoved removal) field.ErrorList {
	var errs field.ErrorList
	arch := plan.ArchX86
	if r.efaArch.set {
		a, ok := archNames[r.efaArch.v]
		if !ok {
			errs = append(errs, field.NotSupported(r.efaArch.at, r.efaArch.v, []string{plan.ArchX86, plan.ArchARM, "amd64", "arm64"}))
		}
		arch = a
	}
	on := r.efaWiring.set && r.efaWiring.v
	switch {
	case on && s.EFA == 0 && r.efaWiring.layer <= stepRank && !efaRemoved.above(r.efaWiring.layer):
		errs = append(errs, fieldErr(field.ErrorTypeInvalid, r.efaWiring.at, "EFAWiring()",
			"wires the step's EFA interfaces, and the step asks for none: add sdk.EFA(n) or sdk.EFAAll(), or leave out sdk.EFAWiring"))
		return errs
	case on && s.EFA == 0:
		on = false
	}
	if !on {
		if r.efaArch.set && r.efaArch.layer <= stepRank && !efaRemoved.above(r.efaArch.layer) {
			errs = append(errs, field.Forbidden(r.efaArch.at, "sdk.EFAArch chooses the library paths of sdk.EFAWiring, which this step does not use: add sdk.EFAWiring(), or leave out sdk.EFAArch"))
		}
		return errs
	}
	if arch == "" {
		return errs
	}
	own := map[string]bool{}
	for _, it := range r.env {
		own[it.v.Name] = true
	}
	var env []plan.EnvVar
	set := func(name, value string) {
		if !own[name] {
			env = append(env, plan.EnvVar{Name: name, Value: value})
		}
	}
	set(envFIProvider, "efa")
	set("FI_EFA_USE_DEVICE_RDMA", "1")
	set("FI_EFA_FORK_SAFE", "1")
	if s.Neuron > 0 {
		set("FI_EFA_ENABLE_SHM_TRANSFER", "1")
		set("CCOM_SOCKET_IFNAME", "eth0")
	}
	set("NCCL_SOCKET_IFNAME", "^lo")
	set("NCCL_IGNORE_DISABLED_P2P", "1")
	set(envLibPath, strings.Join(libraryPath(s, arch), ":"))
	set(envPath, strings.Join(binaryPath(s), ":"))
	s.EFAWiring = &plan.Wiring{Arch: arch, Env: env, Capabilities: []string{capIPCLock}}
	return errs
}

// libraryPath is LD_LIBRARY_PATH under EFA wiring: the EFA installer's
// libraries (aws-ofi-nccl, libfabric, Open MPI), then where the step's
// accelerator's images keep theirs, since the variable replaces the image's own.
func libraryPath(s *plan.Step, arch string) []string {
	dirs := []string{"/opt/amazon/ofi-nccl/lib/" + arch + "-linux-gnu", "/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib"}
	switch {
	case s.Neuron > 0:
		dirs = append(dirs, "/opt/aws/neuron/lib")
	case s.GPU > 0:
		dirs = append(dirs, "/usr/local/cuda/compat/lib", "/usr/local/nvidia/lib", "/usr/local/nvidia/lib64", "/usr/local/cuda/lib64")
	}
	return dirs
}

// binaryPath is PATH under EFA wiring: the EFA installer's programs, then the
// directories the common training images (the Deep Learning Containers, NGC,
// conda) keep theirs in, since the variable replaces the image's own.
func binaryPath(s *plan.Step) []string {
	dirs := []string{"/opt/amazon/efa/bin", "/opt/amazon/openmpi/bin"}
	switch {
	case s.Neuron > 0:
		dirs = append(dirs, "/opt/aws/neuron/bin")
	case s.GPU > 0:
		dirs = append(dirs, "/usr/local/nvidia/bin", "/usr/local/cuda/bin")
	}
	return append(dirs, "/opt/conda/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
}
