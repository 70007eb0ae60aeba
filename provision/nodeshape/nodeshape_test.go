package nodeshape_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/provision/nodeshape"
)

func TestForType(t *testing.T) {
	neuronTaint := corev1.Taint{Key: "aws.amazon.com/neuron", Effect: corev1.TaintEffectNoSchedule}
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		typ       string
		taints    []corev1.Taint
		resources map[string]string
	}{
		{"trn1.32xlarge", []corev1.Taint{neuronTaint}, map[string]string{"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "8"}},
		{"trn2.48xlarge", []corev1.Taint{neuronTaint}, map[string]string{"aws.amazon.com/neuron": "16", "vpc.amazonaws.com/efa": "16"}},
		{"inf2.xlarge", []corev1.Taint{neuronTaint}, map[string]string{"aws.amazon.com/neuron": "1"}},
		{"p5.48xlarge", []corev1.Taint{gpuTaint}, map[string]string{"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}},
		{"g7e.2xlarge", []corev1.Taint{gpuTaint}, map[string]string{"nvidia.com/gpu": "1"}},
	} {
		s, err := nodeshape.ForType(tc.typ)
		if err != nil {
			t.Fatal(err)
		}
		wantLabels := map[string]string{"node.kubernetes.io/instance-type": tc.typ, "manifold.dev/simulated": "true"}
		if diff := cmp.Diff(wantLabels, s.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", tc.typ, diff)
		}
		if diff := cmp.Diff(tc.taints, s.Taints); diff != "" {
			t.Errorf("%s taints (-want +got):\n%s", tc.typ, diff)
		}
		got := map[string]string{}
		for name, q := range s.Resources {
			got[string(name)] = q.String()
		}
		if diff := cmp.Diff(tc.resources, got); diff != "" {
			t.Errorf("%s resources (-want +got):\n%s", tc.typ, diff)
		}
	}
}

// TestOfPlain: an instance without accelerators (a CPU type the catalog does not
// list) is labelled, and neither tainted nor given extended resources.
func TestOfPlain(t *testing.T) {
	s := nodeshape.Of(catalog.Instance{Type: "m7i.8xlarge"})
	if s.Labels["node.kubernetes.io/instance-type"] != "m7i.8xlarge" || len(s.Taints) != 0 || len(s.Resources) != 0 {
		t.Errorf("shape of a CPU instance: %+v", s)
	}
}

// TestOfAMD: AMD GPUs get their own resource and taint, never NVIDIA's.
func TestOfAMD(t *testing.T) {
	s := nodeshape.Of(catalog.Instance{Type: "x.large", Accelerator: catalog.AMD, Devices: 4})
	q := s.Resources["amd.com/gpu"]
	if q.Value() != 4 || len(s.Taints) != 1 || s.Taints[0].Key != "amd.com/gpu" {
		t.Errorf("shape of an AMD instance: %+v", s)
	}
	if _, ok := s.Resources["nvidia.com/gpu"]; ok {
		t.Errorf("AMD instance advertises nvidia.com/gpu: %v", s.Resources)
	}
}

func TestForTypeUnknown(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		want []string
	}{
		{"trn9.huge", []string{`"trn9.huge" is not an EC2 instance type`, "aws ec2 describe-instance-types"}},
		{"trn1.32xlarg", []string{`"trn1.32xlarg" is not an EC2 instance type; did you mean trn1.32xlarge?`}},
		// A GPU type outside the table: its GPUs are unknown, so no plain node.
		{"g5.xlarge", []string{"g5.xlarge", "accelerators", "p5.48xlarge", "catalog/catalog.go"}},
	} {
		_, err := nodeshape.ForType(tc.typ)
		if err == nil {
			t.Errorf("ForType(%q): no error", tc.typ)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ForType(%q): error %q does not say %q", tc.typ, err, want)
			}
		}
	}
}

// TestForTypePlain: an EC2 type without accelerators is a plain node.
func TestForTypePlain(t *testing.T) {
	s, err := nodeshape.ForType("c7i.4xlarge")
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels[plan.LabelInstanceType] != "c7i.4xlarge" || len(s.Taints) != 0 || len(s.Resources) != 0 {
		t.Errorf("shape of c7i.4xlarge: %+v", s)
	}
}

func TestString(t *testing.T) {
	s, err := nodeshape.ForType("trn1.32xlarge")
	if err != nil {
		t.Fatal(err)
	}
	want := "trn1.32xlarge: aws.amazon.com/neuron 16, vpc.amazonaws.com/efa 8; taint aws.amazon.com/neuron:NoSchedule"
	if got := s.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestAdvertisedAndLabelled(t *testing.T) {
	s, err := nodeshape.ForType("trn1.32xlarge")
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{}
	if s.Advertised(n) || s.Labelled(n) {
		t.Fatal("an empty node has the trn1 shape")
	}
	n.Labels = map[string]string{"node.kubernetes.io/instance-type": "trn1.32xlarge", "manifold.dev/simulated": "true", "other": "x"}
	n.Spec.Taints = []corev1.Taint{{Key: "other", Effect: corev1.TaintEffectNoExecute}, s.Taints[0]}
	if !s.Labelled(n) {
		t.Error("a node with the shape's labels and taint, and more, is not Labelled")
	}
	n.Status.Capacity = corev1.ResourceList{"aws.amazon.com/neuron": resource.MustParse("16"), "vpc.amazonaws.com/efa": resource.MustParse("8")}
	n.Status.Allocatable = corev1.ResourceList{"aws.amazon.com/neuron": resource.MustParse("16"), "vpc.amazonaws.com/efa": resource.MustParse("0")}
	if s.Advertised(n) {
		t.Error("a node with 0 EFA allocatable is Advertised")
	}
	n.Status.Allocatable["vpc.amazonaws.com/efa"] = resource.MustParse("8")
	if !s.Advertised(n) {
		t.Error("a node with the shape's capacity and allocatable is not Advertised")
	}
}
