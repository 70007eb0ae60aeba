package catalog_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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
	for _, typ := range []string{"m7i.8xlarg", "foo", "m99.large", "", "M7I.8XLARGE"} {
		if i, ok := catalog.Lookup(typ); ok {
			t.Errorf("Lookup(%q) = %+v, an instance type", typ, i)
		}
	}
}

// TestLookupEC2 checks that every EC2 instance type is known, with the figures
// of the table where it has them and none elsewhere.
func TestLookupEC2(t *testing.T) {
	types := catalog.EC2Types()
	if len(types) < 1000 || !slices.IsSorted(types) {
		t.Fatalf("EC2Types has %d types, sorted %t; want the SDK's 1000 and more, sorted", len(types), slices.IsSorted(types))
	}
	for _, typ := range types {
		i, ok := catalog.Lookup(typ)
		if !ok || i.Type != typ || i.Family == "" || !strings.HasPrefix(typ, i.Family+".") {
			t.Errorf("Lookup(%q) = %+v, %t", typ, i, ok)
		}
	}
	for _, i := range catalog.All() {
		if !i.Listed {
			t.Errorf("table row %s is not Listed", i.Type)
		}
		if _, ok := slices.BinarySearch(types, i.Type); !ok {
			t.Errorf("table row %s is not an EC2 instance type of the SDK %s", i.Type, catalog.SDKVersion())
		}
	}
	m, ok := catalog.Lookup("m7i.8xlarge")
	if !ok || m.Listed || m.Family != "m7i" || m.Devices != 0 || m.Accelerator != "" || m.EFA != 0 {
		t.Errorf("Lookup(m7i.8xlarge) = %+v, %t; want a plain m7i type", m, ok)
	}
}

// TestKnown checks what the catalog claims to know of types outside its table.
func TestKnown(t *testing.T) {
	for _, tc := range []struct {
		typ               string
		neuron, gpus, efa bool
	}{
		{"trn1.32xlarge", true, true, true},
		{"p5.48xlarge", true, true, true},
		{"m7i.8xlarge", true, true, false},
		{"c7i.4xlarge", true, true, false},
		{"r7i.2xlarge", true, true, false},
		{"dl1.24xlarge", true, true, false},
		{"f2.12xlarge", true, true, false},
		{"mac2.metal", true, true, false},
		{"hpc7g.16xlarge", true, true, false},
		{"trn2.3xlarge", false, true, false},
		{"g5.xlarge", true, false, false},
		{"g4ad.xlarge", true, false, false},
		{"gr6.4xlarge", true, false, false},
		{"p3.2xlarge", true, false, false},
		{"p6-b300.48xlarge", true, false, false},
	} {
		i, ok := catalog.Lookup(tc.typ)
		if !ok {
			t.Errorf("%s is not an instance type", tc.typ)
			continue
		}
		if i.NeuronKnown() != tc.neuron || i.GPUsKnown() != tc.gpus || i.EFAKnown() != tc.efa {
			t.Errorf("%s: knows neuron %t, gpus %t, efa %t; want %t, %t, %t", tc.typ,
				i.NeuronKnown(), i.GPUsKnown(), i.EFAKnown(), tc.neuron, tc.gpus, tc.efa)
		}
	}
}

func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"m7i.8xlarg", []string{"m7i.8xlarge"}},
		{"M7i.8xlarge", []string{"m7i.8xlarge"}},
		{"trn1.32xlarg", []string{"trn1.32xlarge"}},
		{"m99.large", []string{"m9g.large"}},
		{"foo", nil},
	} {
		if diff := cmp.Diff(tc.want, catalog.Nearest(tc.typ)); diff != "" {
			t.Errorf("Nearest(%q) (-want +got):\n%s", tc.typ, diff)
		}
	}
	// A near type is a type.
	for _, typ := range catalog.Nearest("c7.large") {
		if _, ok := catalog.Lookup(typ); !ok || !strings.HasPrefix(typ, "c7") {
			t.Errorf("Nearest(c7.large) gives %q", typ)
		}
	}
}

func TestWith(t *testing.T) {
	if got, want := catalog.WithNeuron(16), []string{"trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn2u.48xlarge", "inf1.24xlarge"}; !slices.Equal(got, want) {
		t.Errorf("WithNeuron(16) = %v, want %v", got, want)
	}
	for _, typ := range catalog.WithGPUs(catalog.NVIDIA, 8) {
		if i, _ := catalog.Lookup(typ); i.GPUs() < 8 || i.Accelerator != catalog.NVIDIA {
			t.Errorf("WithGPUs(nvidia, 8) gives %+v", i)
		}
	}
	if got := catalog.WithGPUs(catalog.AMD, 1); len(got) != 0 {
		t.Errorf("WithGPUs(amd, 1) = %v; the table has no AMD types", got)
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
