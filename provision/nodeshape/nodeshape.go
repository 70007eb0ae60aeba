// Package nodeshape says what a Kubernetes node of an EC2 instance type
// advertises, and makes existing nodes advertise it. A Shape, made from the
// catalog, holds the node's labels (node.kubernetes.io/instance-type and the
// LabelSimulated marker), the taints EKS node groups put on accelerator nodes
// (aws.amazon.com/neuron or nvidia.com/gpu, NoSchedule), and the extended
// resources of its Neuron devices, GPUs and EFA interfaces.
//
// Apply gives a node its shape through the API server: the labels and taints on
// the node object, and capacity and allocatable of the extended resources by
// server-side apply on the node's status subresource, under the field manager
// FieldManager, so the fields a kubelet owns (cpu, memory, pods, conditions) are
// left to it. Keep watches shaped nodes and applies their shape again when a
// kubelet resets it (a kubelet that finds its node recreated zeroes the
// extended resources that no device plugin advertises).
//
// The simulated cluster's fake nodes and the workers of `kind up --simulate` are
// shaped here, and nowhere else.
package nodeshape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/plan"
)

// LabelSimulated marks every node this package shapes: its accelerators and EFA
// interfaces are counted resources, not devices.
const LabelSimulated = "manifold.dev/simulated"

// FieldManager owns the extended resources Apply sets on a node's status.
const FieldManager = "manifold-nodeshape"

// Taint keys of accelerator nodes, as EKS node groups and Karpenter set them;
// the Neuron device plugin tolerates the first.
const (
	TaintNeuron = plan.ResourceNeuron
	TaintNVIDIA = plan.ResourceNVIDIA
	TaintAMD    = plan.ResourceAMD
)

// Nodes are the operations on a cluster's nodes this package uses, with the
// signatures of client-go's typed clients: both the CoreV1().Nodes() of
// internal/kubeclient and that of client-go's Clientset are Nodes.
type Nodes interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Update(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// Shape is what a node of one instance type advertises.
type Shape struct {
	// InstanceType is the EC2 instance type, the value of
	// node.kubernetes.io/instance-type.
	InstanceType string
	// Labels are the node's labels: the instance type and LabelSimulated.
	Labels map[string]string
	// Taints are the NoSchedule taints of the node's accelerators, if any.
	Taints []corev1.Taint
	// Resources are the extended resources of the node's Neuron devices, GPUs
	// and EFA interfaces, as both capacity and allocatable. Empty for a node
	// without accelerators or EFA.
	Resources corev1.ResourceList
}

// Of returns the shape of a node of instance inst. An Instance that is not in the
// catalog (a plain CPU type, say) gives a shape with labels only.
func Of(inst catalog.Instance) Shape {
	s := Shape{
		InstanceType: inst.Type,
		Labels: map[string]string{
			plan.LabelInstanceType: inst.Type,
			LabelSimulated:         "true",
		},
		Resources: corev1.ResourceList{},
	}
	count := func(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }
	if n := inst.NeuronDevices(); n > 0 {
		s.Resources[plan.ResourceNeuron] = count(n)
		s.Taints = append(s.Taints, corev1.Taint{Key: TaintNeuron, Effect: corev1.TaintEffectNoSchedule})
	}
	if n := inst.GPUs(); n > 0 {
		switch inst.Accelerator {
		case catalog.NVIDIA:
			s.Resources[plan.ResourceNVIDIA] = count(n)
			s.Taints = append(s.Taints, corev1.Taint{Key: TaintNVIDIA, Effect: corev1.TaintEffectNoSchedule})
		case catalog.AMD:
			s.Resources[plan.ResourceAMD] = count(n)
			s.Taints = append(s.Taints, corev1.Taint{Key: TaintAMD, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	if inst.EFA > 0 {
		s.Resources[plan.ResourceEFA] = count(inst.EFA)
	}
	return s
}

// ForType returns the shape of a node of instance type t: the catalog's figures
// for a type of its table, and a plain node (no accelerators, no EFA interfaces)
// for any other EC2 type that has no accelerators. A type of an accelerator
// family outside the table (g5.xlarge, say) is an error, as its figures are
// unknown.
func ForType(t string) (Shape, error) {
	inst, ok := catalog.Lookup(t)
	switch {
	case !ok:
		return Shape{}, errors.New(catalog.NotAType(t))
	case !inst.NeuronKnown() || !inst.GPUsKnown():
		return Shape{}, fmt.Errorf("the catalog has no figures for the accelerators of %s, so a node of it cannot be shaped; choose one of %s, or add %s to catalog/catalog.go",
			t, strings.Join(catalog.Types(), ", "), t)
	}
	return Of(inst), nil
}

// Labelled reports whether node n carries every label and taint of s.
func (s Shape) Labelled(n *corev1.Node) bool {
	for k, v := range s.Labels {
		if got, ok := n.Labels[k]; !ok || got != v {
			return false
		}
	}
	for _, t := range s.Taints {
		if !slices.ContainsFunc(n.Spec.Taints, func(have corev1.Taint) bool {
			return have.Key == t.Key && have.Effect == t.Effect && have.Value == t.Value
		}) {
			return false
		}
	}
	return true
}

// Advertised reports whether node n's status has every extended resource of s
// as both capacity and allocatable, with the shape's counts.
func (s Shape) Advertised(n *corev1.Node) bool {
	for name, want := range s.Resources {
		for _, list := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
			got, ok := list[name]
			if !ok || got.Cmp(want) != 0 {
				return false
			}
		}
	}
	return true
}

// Apply gives the existing node name the shape s: ApplyMeta, then ApplyStatus.
func Apply(ctx context.Context, c Nodes, name string, s Shape) error {
	if err := ApplyMeta(ctx, c, name, s); err != nil {
		return err
	}
	_, err := ApplyStatus(ctx, c, name, s)
	return err
}

// ApplyMeta adds the labels and taints of s to node name, keeping every other
// label and taint it has (such as the not-ready taint the node lifecycle
// controller manages). A taint of s replaces one of the same key and effect.
// The node is read and updated, again (after a growing pause) if another writer
// got there first: a node that has just joined is written often by its kubelet
// and the node controllers.
func ApplyMeta(ctx context.Context, c Nodes, name string, s Shape) error {
	err := retry.RetryOnConflict(conflictBackoff, func() error {
		n, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Labelled(n) {
			return nil
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		maps.Copy(n.Labels, s.Labels)
		for _, t := range s.Taints {
			i := slices.IndexFunc(n.Spec.Taints, func(have corev1.Taint) bool { return have.Key == t.Key && have.Effect == t.Effect })
			if i >= 0 {
				n.Spec.Taints[i] = t
			} else {
				n.Spec.Taints = append(n.Spec.Taints, t)
			}
		}
		_, err = c.Update(ctx, n, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("label and taint node %s as %s: %w", name, s.InstanceType, err)
	}
	return nil
}

// conflictBackoff spaces ApplyMeta's attempts: 10ms, doubling up to 2s, for
// about 12s in all.
var conflictBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 2 * time.Second}

// ApplyStatus sets capacity and allocatable of the extended resources of s on
// node name by server-side apply on its status subresource, as FieldManager,
// forcing ownership of those fields from whoever held them. Nothing else in the
// status changes: cpu, memory, pods and the conditions stay the kubelet's. A
// resource this manager applied before that s no longer has is removed. It
// returns the node as the server stored it.
func ApplyStatus(ctx context.Context, c Nodes, name string, s Shape) (*corev1.Node, error) {
	body, err := statusApply(name, s)
	if err != nil {
		return nil, fmt.Errorf("set the %s capacity of node %s: %w", s.InstanceType, name, err)
	}
	n, err := c.Patch(ctx, name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: FieldManager, Force: new(true)}, "status")
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("set the %s capacity of node %s: the node does not exist", s.InstanceType, name)
		}
		return nil, fmt.Errorf("set the %s capacity of node %s: %w", s.InstanceType, name, err)
	}
	return n, nil
}

// statusApply is the apply configuration ApplyStatus sends, as JSON: node
// name with the extended resources of s as capacity and allocatable, or with
// an empty status when s has none.
func statusApply(name string, s Shape) ([]byte, error) {
	type status struct {
		Capacity    corev1.ResourceList `json:"capacity,omitempty"`
		Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	}
	type metadata struct {
		Name string `json:"name"`
	}
	return json.Marshal(struct {
		Kind       string   `json:"kind"`
		APIVersion string   `json:"apiVersion"`
		Metadata   metadata `json:"metadata"`
		Status     status   `json:"status"`
	}{"Node", "v1", metadata{name}, status{s.Resources, s.Resources}})
}

// String describes the shape: "trn1.32xlarge: aws.amazon.com/neuron 16,
// vpc.amazonaws.com/efa 8; taint aws.amazon.com/neuron:NoSchedule".
func (s Shape) String() string {
	var b strings.Builder
	b.WriteString(s.InstanceType)
	names := slices.Sorted(maps.Keys(s.Resources))
	for i, name := range names {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		q := s.Resources[name]
		fmt.Fprintf(&b, "%s%s %s", sep, name, q.String())
	}
	for i, t := range s.Taints {
		sep := ", "
		if i == 0 {
			sep = "; taint "
		}
		fmt.Fprintf(&b, "%s%s:%s", sep, t.Key, t.Effect)
	}
	return b.String()
}
