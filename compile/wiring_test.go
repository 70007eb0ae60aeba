package compile_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// The variables of EFA wiring, as AWS documents them for libfabric, NCCL and the
// Neuron runtime.
var (
	wiringCommon = []plan.EnvVar{
		{Name: "FI_PROVIDER", Value: "efa"},
		{Name: "FI_EFA_USE_DEVICE_RDMA", Value: "1"},
		{Name: "FI_EFA_FORK_SAFE", Value: "1"},
	}
	wiringNeuron = []plan.EnvVar{
		{Name: "FI_EFA_ENABLE_SHM_TRANSFER", Value: "1"},
		{Name: "CCOM_SOCKET_IFNAME", Value: "eth0"},
	}
	wiringNCCL = []plan.EnvVar{
		{Name: "NCCL_SOCKET_IFNAME", Value: "^lo"},
		{Name: "NCCL_IGNORE_DISABLED_P2P", Value: "1"},
	}
)

func concatEnv(lists ...[]plan.EnvVar) []plan.EnvVar {
	var out []plan.EnvVar
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// envValue returns the value of name in env and whether it is there once.
func envValue(env []plan.EnvVar, name string) (string, int) {
	v, n := "", 0
	for _, e := range env {
		if e.Name == name {
			v, n = e.Value, n+1
		}
	}
	return v, n
}

func TestEFAWiringTrainium(t *testing.T) {
	s := mustStep(t, one(sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring()), compile.Options{}, "s")
	w := s.EFAWiring
	if w == nil {
		t.Fatal("no wiring in the plan")
	}
	// Everything but the two paths, in order; the paths are checked apart.
	var fixed []plan.EnvVar
	for _, e := range w.Env {
		if e.Name != "LD_LIBRARY_PATH" && e.Name != "PATH" {
			fixed = append(fixed, e)
		}
	}
	if diff := cmp.Diff(concatEnv(wiringCommon, wiringNeuron, wiringNCCL), fixed); diff != "" {
		t.Errorf("wiring env (-want +got):\n%s", diff)
	}
	lib, _ := envValue(w.Env, "LD_LIBRARY_PATH")
	for _, dir := range []string{"/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib", "/opt/aws/neuron/lib"} {
		if !slices.Contains(strings.Split(lib, ":"), dir) {
			t.Errorf("LD_LIBRARY_PATH %q lacks %s", lib, dir)
		}
	}
	path, _ := envValue(w.Env, "PATH")
	dirs := strings.Split(path, ":")
	if dirs[0] != "/opt/amazon/efa/bin" {
		t.Errorf("PATH %q does not start with the EFA installer's programs", path)
	}
	for _, dir := range []string{"/opt/aws/neuron/bin", "/opt/conda/bin", "/usr/local/bin", "/usr/bin", "/bin"} {
		if !slices.Contains(dirs, dir) {
			t.Errorf("PATH %q lacks %s, where images keep their programs", path, dir)
		}
	}
	if diff := cmp.Diff([]string{"IPC_LOCK"}, w.Capabilities); diff != "" {
		t.Errorf("capabilities (-want +got):\n%s", diff)
	}
	if !s.MountsSharedMemory() || s.SharedMemory != "" {
		t.Errorf("wiring without sdk.SharedMemory: mounts /dev/shm %v with size %q, want a mount without a limit", s.MountsSharedMemory(), s.SharedMemory)
	}
}

func TestEFAWiringGPUHasNoNeuronVariables(t *testing.T) {
	s := mustStep(t, one(sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll(), sdk.EFAWiring(), sdk.SharedMemory("128Gi")), compile.Options{}, "s")
	for _, e := range wiringNeuron {
		if _, n := envValue(s.EFAWiring.Env, e.Name); n != 0 {
			t.Errorf("a GPU step gets the Neuron runtime's %s", e.Name)
		}
	}
	lib, _ := envValue(s.EFAWiring.Env, "LD_LIBRARY_PATH")
	if strings.Contains(lib, "neuron") || !strings.Contains(lib, "/usr/local/cuda/compat/lib") {
		t.Errorf("LD_LIBRARY_PATH of a GPU step: %q", lib)
	}
	if s.SharedMemory != "128Gi" {
		t.Errorf("sdk.SharedMemory's size is lost under wiring: %q", s.SharedMemory)
	}
}

func TestEFAWiringArch(t *testing.T) {
	for arch, dir := range map[string]string{"aarch64": "aarch64", "arm64": "aarch64", "amd64": "x86_64", "x86_64": "x86_64"} {
		s := mustStep(t, one(sdk.EFA(1), sdk.EFAWiring(), sdk.EFAArch(arch)), compile.Options{}, "s")
		lib, _ := envValue(s.EFAWiring.Env, "LD_LIBRARY_PATH")
		if want := "/opt/amazon/ofi-nccl/lib/" + dir + "-linux-gnu"; !strings.HasPrefix(lib, want+":") {
			t.Errorf("EFAArch(%q): LD_LIBRARY_PATH %q, want it to start with %s", arch, lib, want)
		}
	}
	// From manifold.toml, for every wired step.
	s := mustStep(t, one(sdk.EFA(1)), compile.Options{Config: compile.Config{EFAWiring: true, EFAArch: "arm64"}}, "s")
	if s.EFAWiring == nil || s.EFAWiring.Arch != plan.ArchARM {
		t.Errorf("efa_wiring and efa_arch from the config: %+v", s.EFAWiring)
	}
}

func TestEFAWiringOwnEnvWins(t *testing.T) {
	f := one(sdk.EFA(2), sdk.EFAWiring(), sdk.Env("NCCL_SOCKET_IFNAME", "eth1"), sdk.Env("PATH", "/opt/mine/bin:/usr/bin"))
	s := mustStep(t, f, compile.Options{}, "s")
	for _, name := range []string{"NCCL_SOCKET_IFNAME", "PATH"} {
		if _, n := envValue(s.EFAWiring.Env, name); n != 0 {
			t.Errorf("wiring sets %s, which the step sets itself", name)
		}
	}
	if v, n := envValue(s.Env, "NCCL_SOCKET_IFNAME"); v != "eth1" || n != 1 {
		t.Errorf("the step's own NCCL_SOCKET_IFNAME: %q ×%d", v, n)
	}
	if _, n := envValue(s.EFAWiring.Env, "FI_PROVIDER"); n != 1 {
		t.Error("the variables the step does not set are still wired")
	}
}

func TestEFAWiringFromFlowSkipsStepsWithoutEFA(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image(img), sdk.EFAWiring()).
		Step("prep", sdk.Command("true")).
		Step("train", sdk.Command("true"), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFAAll())
	p := mustCompile(t, f, compile.Options{})
	if w := p.Step("prep").EFAWiring; w != nil || p.Step("prep").MountsSharedMemory() {
		t.Errorf("a step without EFA is wired by the flow's default: %+v", w)
	}
	if p.Step("train").EFAWiring == nil {
		t.Error("the flow's EFAWiring does not wire its EFA step")
	}
	// The same from manifold.toml.
	f = sdk.NewFlow("f", sdk.Image(img)).
		Step("prep", sdk.Command("true")).
		Step("train", sdk.Command("true"), sdk.EFA(4))
	p = mustCompile(t, f, compile.Options{Config: compile.Config{EFAWiring: true}})
	if p.Step("prep").EFAWiring != nil || p.Step("train").EFAWiring == nil {
		t.Errorf("efa_wiring = true: prep %+v, train %+v", p.Step("prep").EFAWiring, p.Step("train").EFAWiring)
	}
}

func TestEFAWiringErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flow   *sdk.Flow
		want   field.ErrorList
		detail string
	}{{
		name:   "on a step without EFA",
		flow:   one(sdk.EFAWiring()),
		want:   field.ErrorList{field.Invalid(sAt("efaWiring"), nil, "")},
		detail: "add sdk.EFA(n) or sdk.EFAAll()",
	}, {
		name:   "unknown architecture",
		flow:   one(sdk.EFA(1), sdk.EFAWiring(), sdk.EFAArch("riscv64")),
		want:   field.ErrorList{field.NotSupported[string](sAt("efaArch"), nil, nil)},
		detail: "",
	}, {
		name:   "architecture without wiring",
		flow:   one(sdk.EFA(1), sdk.EFAArch("arm64")),
		want:   field.ErrorList{field.Forbidden(sAt("efaArch"), "")},
		detail: "add sdk.EFAWiring()",
	}, {
		name:   "a volume over wiring's /dev/shm",
		flow:   one(sdk.EFA(1), sdk.EFAWiring(), sdk.Volume("scratch", "/dev/shm")),
		want:   field.ErrorList{field.Forbidden(sAt("volumes").Index(0).Child("path"), "")},
		detail: "sdk.EFAWiring mounts a memory-backed /dev/shm",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			errs := wantErrs(t, tc.flow, compile.Options{}, tc.want)
			wantDetail(t, errs, 0, tc.detail)
		})
	}
}
