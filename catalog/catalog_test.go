package catalog_test

import (
	"sort"
	"testing"

	"github.com/manifoldflow/manifold/catalog"
)

// TestFigures checks rows against the figures in AWS's documentation.
func TestFigures(t *testing.T) {
	for _, tc := range []struct {
		typ               string
		neuron, gpus, efa int
		coresPerNeuronDev int
	}{
		{"trn1.2xlarge", 1, 0, 0, 2},
		{"trn1.32xlarge", 16, 0, 8, 2},
		{"trn1n.32xlarge", 16, 0, 16, 2},
		{"trn2.48xlarge", 16, 0, 16, 8},
		{"inf1.24xlarge", 16, 0, 1, 4},
		{"inf2.xlarge", 1, 0, 0, 2},
		{"inf2.48xlarge", 12, 0, 0, 2},
		{"p4d.24xlarge", 0, 8, 4, 0},
		{"p5.48xlarge", 0, 8, 32, 0},
		{"p5en.48xlarge", 0, 8, 16, 0},
		{"p6-b200.48xlarge", 0, 8, 8, 0},
		{"g7e.48xlarge", 0, 8, 4, 0},
	} {
		i, ok := catalog.Lookup(tc.typ)
		if !ok {
			t.Errorf("%s is not in the catalog", tc.typ)
			continue
		}
		if i.NeuronDevices() != tc.neuron || i.GPUs() != tc.gpus || i.EFA != tc.efa || i.CoresPerDevice != tc.coresPerNeuronDev {
			t.Errorf("%s: neuron %d, gpus %d, efa %d, cores %d; want %d, %d, %d, %d", tc.typ,
				i.NeuronDevices(), i.GPUs(), i.EFA, i.CoresPerDevice, tc.neuron, tc.gpus, tc.efa, tc.coresPerNeuronDev)
		}
	}
}

func TestLookupUnknown(t *testing.T) {
	if _, ok := catalog.Lookup("m5.large"); ok {
		t.Error("m5.large is in the catalog")
	}
}

func TestTypesSortedAndComplete(t *testing.T) {
	types := catalog.Types()
	if !sort.StringsAreSorted(types) {
		t.Errorf("Types is not sorted: %v", types)
	}
	if len(types) != len(catalog.All()) {
		t.Errorf("Types has %d entries, All %d", len(types), len(catalog.All()))
	}
	for _, i := range catalog.All() {
		if i.Type == "" || i.Family == "" || (i.Devices > 0) != (i.Accelerator != "") {
			t.Errorf("incomplete row %+v", i)
		}
	}
}
