package emit_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/sdk"
)

// TestZeroIsNoDefault: a step that takes the flow's accelerator defaults away with
// Trainium(0) and EFA(0), or whose own devices --set takes away, emits on every
// target exactly what a step that never had them emits: no Neuron or EFA limit, no
// Neuron toleration, no EFA wiring, no DRA claim, no Neuron rendezvous variable.
func TestZeroIsNoDefault(t *testing.T) {
	img := sdk.Image("example.com/flow:v1")
	devices := []sdk.Option{sdk.Trainium(16), sdk.EFAAll(), sdk.EFAWiring(), sdk.DRA()}
	var asFlow []sdk.FlowOption
	var asStep []sdk.StepOption
	for _, o := range devices {
		asFlow, asStep = append(asFlow, o), append(asStep, o)
	}
	prep := []sdk.StepOption{sdk.Command("prep"), sdk.Nodes(2)}
	train := []sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.After("prep")}

	never := sdk.NewFlow("zero", img, sdk.InstanceType("trn2.48xlarge")).
		Step("prep", prep...).
		Step("train", append(train, asStep...)...)
	flowDefault := sdk.NewFlow("zero", append([]sdk.FlowOption{img, sdk.InstanceType("trn2.48xlarge")}, asFlow...)...).
		Step("prep", append(prep, sdk.Trainium(0), sdk.EFA(0))...).
		Step("train", train...)
	coded := sdk.NewFlow("zero", img, sdk.InstanceType("trn2.48xlarge")).
		Step("prep", append(prep, asStep...)...).
		Step("train", append(train, asStep...)...)
	takenAway := compile.Options{Overrides: map[string][]sdk.StepOption{"prep": {sdk.Trainium(0), sdk.EFA(0)}}}

	emitAll := func(f *sdk.Flow, o compile.Options) map[string][]emit.File {
		t.Helper()
		p, errs := compile.Compile(f, o)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		out := map[string][]emit.File{}
		for _, target := range targets.All() {
			files, errs := emit.Files(target, p)
			if len(errs) > 0 {
				t.Fatalf("%s: %v", target.Name(), errs)
			}
			out[target.Name()] = files
		}
		return out
	}
	want := emitAll(never, compile.Options{})
	// The devices are there, on train, for the comparison to mean something.
	for name, files := range want {
		if !bytes.Contains(files[0].Data, []byte("neuron")) {
			t.Fatalf("%s: %s never mentions neuron", name, files[0].Name)
		}
	}
	for what, got := range map[string]map[string][]emit.File{
		"flow defaults, prep zeroes them":       emitAll(flowDefault, compile.Options{}),
		"prep's own devices, --set zeroes them": emitAll(coded, takenAway),
	} {
		for name := range want {
			if diff := cmp.Diff(fileText(want[name]), fileText(got[name])); diff != "" {
				t.Errorf("%s: %s differs from a prep that never had devices (-want +got):\n%s", what, name, diff)
			}
		}
	}
}

// fileText maps each file's name to its text, for diffs that read.
func fileText(files []emit.File) map[string]string {
	out := map[string]string{}
	for _, f := range files {
		out[f.Name] = string(f.Data)
	}
	return out
}
