package simcluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manifoldflow/manifold/provision/nodeshape"
)

// CPUInstanceType is the instance type of the plain CPU nodes: no accelerators,
// no taints, so steps without an instance type land there.
const CPUInstanceType = "m7i.8xlarge"

// FakeNodeAnnotation, with the value "fake", marks the nodes kwok runs (the
// fake nodes); kwok leaves every other node, such as a real one, to its kubelet.
const FakeNodeAnnotation = "kwok.x-k8s.io/node"

// LabelSimulated marks every fake node the harness creates.
const LabelSimulated = nodeshape.LabelSimulated

// Taint keys the accelerator nodes carry, as EKS puts them on such nodes.
const (
	TaintNeuron = nodeshape.TaintNeuron
	TaintNVIDIA = nodeshape.TaintNVIDIA
)

// Zone is the availability zone (topology.kubernetes.io/zone) of every default
// node: one zone, as a training node group's usually is, so multi-node EFA
// steps (whose pods share a zone) can land. Tests add nodes in other zones.
const Zone = "sim-1a"

// NodeGroup asks for Count fake nodes of one instance type.
type NodeGroup struct {
	InstanceType string
	Count        int
}

// DefaultNodes is the node set of a cluster started with no Options.Nodes: two of
// each multi-node training type (so multi-node pods can land on distinct nodes),
// one Inferentia2 node and two CPU nodes.
func DefaultNodes() []NodeGroup {
	return []NodeGroup{
		{"trn1.32xlarge", 2},
		{"trn2.48xlarge", 2},
		{"inf2.xlarge", 1},
		{"p5.48xlarge", 2},
		{CPUInstanceType, 2},
	}
}

// hostSize is the vCPU count and memory (GiB) of each instance type the
// simulated cluster can make; the catalog holds only accelerators and EFA.
var hostSize = map[string]struct{ cpu, memoryGiB int }{
	"trn1.32xlarge":  {128, 512},
	"trn1n.32xlarge": {128, 512},
	"trn2.48xlarge":  {192, 2048},
	"inf2.xlarge":    {4, 16},
	"inf2.48xlarge":  {192, 768},
	"p5.48xlarge":    {192, 2048},
	"p4d.24xlarge":   {96, 1152},
	CPUInstanceType:  {32, 128},
}

// NodeName is the name of fake node i of instance type t.
func NodeName(t string, i int) string {
	return strings.ReplaceAll(t, ".", "-") + "-" + strconv.Itoa(i)
}

// shapeOf returns the shape of a node of instance type t, as nodeshape.ForType
// gives it: the catalog's, or for a type without accelerators, such as
// CPUInstanceType, a plain one.
func shapeOf(t string) (nodeshape.Shape, error) { return nodeshape.ForType(t) }

// nodeFor builds node i of instance type t: its labels, taints and extended
// resources are t's shape (package nodeshape), to which it adds the host's cpu,
// memory and pods, as a kubelet reports them, and the labels and annotation kwok
// manages nodes by. The status (capacity equals allocatable) holds only the
// host's resources; createNodes applies the shape's.
func nodeFor(t string, i int) (*corev1.Node, nodeshape.Shape, error) {
	size, ok := hostSize[t]
	if !ok {
		return nil, nodeshape.Shape{}, fmt.Errorf("the simulated cluster has no host size for instance type %q; add it to hostSize", t)
	}
	shape, err := shapeOf(t)
	if err != nil {
		return nil, nodeshape.Shape{}, err
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(size.cpu), resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(strconv.Itoa(size.memoryGiB) + "Gi"),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
	name := NodeName(t, i)
	labels := map[string]string{
		corev1.LabelHostname:     name,
		corev1.LabelOSStable:     "linux",
		corev1.LabelArchStable:   "amd64",
		corev1.LabelTopologyZone: Zone,
		"type":                   "kwok",
	}
	maps.Copy(labels, shape.Labels)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{FakeNodeAnnotation: "fake"},
		},
		Spec: corev1.NodeSpec{Taints: slices.Clone(shape.Taints)},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
		},
	}, shape, nil
}

// createNodes creates the fake nodes, sets the host's resources through the
// status subresource (a create ignores status), as a kubelet would, then the
// shape's extended resources as `kind up --simulate` does (nodeshape.ApplyStatus).
// kwok, started afterwards, keeps both and marks the nodes Ready.
func createNodes(ctx context.Context, c kubernetes.Interface, groups []NodeGroup) ([]string, error) {
	var names []string
	for _, g := range groups {
		for i := range g.Count {
			n, shape, err := nodeFor(g.InstanceType, i)
			if err != nil {
				return nil, err
			}
			status := n.Status
			created, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			if err != nil {
				return nil, fmt.Errorf("create node %s: %w", n.Name, err)
			}
			created.Status.Capacity, created.Status.Allocatable = status.Capacity, status.Allocatable
			if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return nil, fmt.Errorf("set status of node %s: %w", n.Name, err)
			}
			if _, err := nodeshape.ApplyStatus(ctx, c.CoreV1().Nodes(), n.Name, shape); err != nil {
				return nil, err
			}
			names = append(names, n.Name)
		}
	}
	return names, nil
}

// nodeReady reports whether n is Ready and free of the not-ready taint the node
// lifecycle controller removes once it has seen the node Ready.
func nodeReady(n *corev1.Node) bool {
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}
