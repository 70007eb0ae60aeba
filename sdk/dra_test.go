package sdk_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/sdk"
)

func TestDRAOptions(t *testing.T) {
	s := stepSpec(sdk.DRA(), sdk.Claim("a"), sdk.Claim("b"))
	want := sdk.StepSpec{DRA: ptr(true), Claims: []string{"a", "b"}}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	f := sdk.NewFlow("f", sdk.DRA(), sdk.Claim("c")).Spec()
	if diff := cmp.Diff(sdk.StepSpec{DRA: ptr(true), Claims: []string{"c"}}, f.Defaults); diff != "" {
		t.Errorf("flow defaults (-want +got):\n%s", diff)
	}
	for opt, want := range map[any]string{sdk.DRA(): "DRA()", sdk.Claim("neuron-efa"): `Claim("neuron-efa")`} {
		if got := fmt.Sprint(opt); got != want {
			t.Errorf("%#v prints %q, want %q", opt, got, want)
		}
	}
}
