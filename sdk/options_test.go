package sdk_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/sdk"
)

func ptr[T any](v T) *T { return &v }

func stepSpec(opts ...sdk.StepOption) sdk.StepSpec {
	return sdk.NewFlow("f").Step("s", opts...).Spec().Steps[0].Spec
}

func TestLastOptionWins(t *testing.T) {
	s := stepSpec(sdk.Trainium(4), sdk.Trainium(16), sdk.Image("a"), sdk.Image("b"),
		sdk.Timeout(time.Minute), sdk.Timeout(time.Hour), sdk.EFA(4), sdk.EFAAll())
	if *s.Trainium != 16 || *s.Image != "b" || *s.Timeout != time.Hour {
		t.Errorf("got Trainium %d, Image %q, Timeout %s; want the last of each", *s.Trainium, *s.Image, *s.Timeout)
	}
	if s.EFA != nil || !s.EFAAll {
		t.Errorf("EFAAll after EFA(4): EFA=%v EFAAll=%v, want nil and true", s.EFA, s.EFAAll)
	}
	s = stepSpec(sdk.EFAAll(), sdk.EFA(2))
	if s.EFAAll || s.EFA == nil || *s.EFA != 2 {
		t.Errorf("EFA(2) after EFAAll: EFA=%v EFAAll=%v", s.EFA, s.EFAAll)
	}
}

func TestListOptionsAccumulate(t *testing.T) {
	s := stepSpec(sdk.After("a"), sdk.After("b", "c"),
		sdk.Env("X", "1"), sdk.Env("Y", "2"), sdk.Env("X", "3"),
		sdk.Label("k", "1"), sdk.Label("k", "2"),
		sdk.Toleration("t", "", "NoSchedule"), sdk.Toleration("u", "v", ""),
		sdk.Resource("example.com/fpga", 1), sdk.Resource("example.com/fpga", 2),
		sdk.Volume("data", "/data"), sdk.Secret("s1"), sdk.ImagePullSecret("p1"))
	want := sdk.StepSpec{
		After:            []string{"a", "b", "c"},
		Env:              []sdk.EnvSpec{{Name: "X", Value: "3"}, {Name: "Y", Value: "2"}},
		Labels:           []sdk.KeyValue{{Key: "k", Value: "2"}},
		Tolerations:      []sdk.TolerationSpec{{Key: "t", Operator: "Exists", Effect: "NoSchedule"}, {Key: "u", Operator: "Equal", Value: "v"}},
		Resources:        []sdk.ResourceSpec{{Name: "example.com/fpga", Count: 2}},
		Volumes:          []sdk.VolumeSpec{{Claim: "data", Path: "/data"}},
		Secrets:          []string{"s1"},
		ImagePullSecrets: []string{"p1"},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}

func TestForeachKeepsEmptyApartFromUnset(t *testing.T) {
	if s := stepSpec(); s.Foreach != nil {
		t.Errorf("Foreach without the option = %#v, want nil", s.Foreach)
	}
	if s := stepSpec(sdk.Foreach()); s.Foreach == nil || len(s.Foreach) != 0 {
		t.Errorf("Foreach() = %#v, want empty and not nil", s.Foreach)
	}
}

func TestStepOptionOnFlowIsDefault(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Image("img"), sdk.Trainium(1), sdk.Param("epochs", "3"), sdk.Param("epochs", "4"), sdk.Schedule(" @daily ")).
		Step("s", sdk.Trainium(2))
	spec := f.Spec()
	if *spec.Defaults.Image != "img" || *spec.Defaults.Trainium != 1 {
		t.Errorf("flow defaults = %+v", spec.Defaults)
	}
	if *spec.Steps[0].Spec.Trainium != 2 || spec.Steps[0].Spec.Image != nil {
		t.Errorf("the step's own spec holds only its own options: %+v", spec.Steps[0].Spec)
	}
	if diff := cmp.Diff([]sdk.ParamSpec{{Name: "epochs", Default: "4"}}, spec.Params); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
	if *spec.Schedule != "@daily" {
		t.Errorf("schedule %q", *spec.Schedule)
	}
}

func TestSpecIsACopy(t *testing.T) {
	f := sdk.NewFlow("f", sdk.Env("A", "1")).Step("s", sdk.After("x"), sdk.Command("a", "b"), sdk.CPU("1"))
	spec := f.Spec()
	spec.Steps[0].Spec.After[0] = "changed"
	spec.Steps[0].Spec.Command[0] = "changed"
	*spec.Steps[0].Spec.CPU = "changed"
	spec.Defaults.Env[0].Value = "changed"
	again := f.Spec()
	if again.Steps[0].Spec.After[0] != "x" || again.Steps[0].Spec.Command[0] != "a" ||
		*again.Steps[0].Spec.CPU != "1" || again.Defaults.Env[0].Value != "1" {
		t.Errorf("changing a Spec changed the flow: %+v", again)
	}
}

func TestCommandCopiesItsArguments(t *testing.T) {
	argv := []string{"python", "train.py"}
	opt := sdk.Command(argv...)
	argv[0] = "changed"
	if got := stepSpec(opt).Command[0]; got != "python" {
		t.Errorf("Command kept a reference to the caller's slice: %q", got)
	}
}

func TestNilOptionsAreIgnored(t *testing.T) {
	s := stepSpec(nil, sdk.CPU("1"), nil)
	if *s.CPU != "1" {
		t.Errorf("CPU = %v", s.CPU)
	}
	_ = sdk.NewFlow("f", nil)
}

func TestOptionsCompareAndPrint(t *testing.T) {
	if sdk.Trainium(16) != sdk.Trainium(16) || sdk.Trainium(16) == sdk.Trainium(8) {
		t.Error("options of the same value should compare equal, and of different values not")
	}
	for _, tc := range []struct {
		opt  any
		want string
	}{
		{sdk.Trainium(16), "Trainium(16)"},
		{sdk.Inferentia(1), "Inferentia(1)"},
		{sdk.EFA(8), "EFA(8)"},
		{sdk.EFAAll(), "EFAAll()"},
		{sdk.GPU(8), "GPU(8)"},
		{sdk.CPU("4"), `CPU("4")`},
		{sdk.Resource("example.com/fpga", 2), `Resource("example.com/fpga", 2)`},
		{sdk.Toleration("k", "v", "NoSchedule"), `Toleration("k", "v", "NoSchedule")`},
		{sdk.SecretEnv("T", "s", "k"), `SecretEnv("T", "s", "k")`},
		{sdk.Env("A", "1"), `Env("A", "1")`},
		{sdk.Timeout(6 * time.Hour), "Timeout(6h0m0s)"},
		{sdk.Command("a", "b"), `Command(["a" "b"])`},
		{sdk.Param("epochs", "3"), `Param("epochs", "3")`},
		{sdk.RunAsNonRoot(true), "RunAsNonRoot(true)"},
		{sdk.HostNetwork(true), "HostNetwork(true)"},
		{sdk.NoArtifacts(), "NoArtifacts()"},
	} {
		if got := fmt.Sprint(tc.opt); got != tc.want {
			t.Errorf("%#v prints %q, want %q", tc.opt, got, tc.want)
		}
	}
}

func TestEveryScalarOption(t *testing.T) {
	s := stepSpec(sdk.CPU("1"), sdk.Memory("2Gi"), sdk.Disk("3Gi"), sdk.SharedMemory("4Gi"),
		sdk.GPU(1), sdk.GPUVendor("amd"), sdk.Inferentia(2), sdk.InstanceType("inf2.xlarge"),
		sdk.NodeSelector("a", "b"), sdk.ImagePullPolicy("Always"), sdk.ServiceAccount("sa"),
		sdk.Namespace("ns"), sdk.Port(29500), sdk.Nodes(2), sdk.RunAsUser(1000), sdk.RunAsNonRoot(true),
		sdk.Retry(3), sdk.RetryBackoff(time.Second), sdk.Annotation("x", "y"))
	want := sdk.StepSpec{
		CPU: ptr("1"), Memory: ptr("2Gi"), Disk: ptr("3Gi"), SharedMemory: ptr("4Gi"),
		GPU: ptr(1), GPUVendor: ptr("amd"), Inferentia: ptr(2), InstanceType: ptr("inf2.xlarge"),
		NodeSelector: []sdk.KeyValue{{Key: "a", Value: "b"}}, ImagePullPolicy: ptr("Always"),
		ServiceAccount: ptr("sa"), Namespace: ptr("ns"), Port: ptr(29500), Nodes: ptr(2), RunAsUser: ptr(int64(1000)),
		RunAsNonRoot: ptr(true), Retry: ptr(3), RetryBackoff: ptr(time.Second),
		Annotations: []sdk.KeyValue{{Key: "x", Value: "y"}},
	}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}
