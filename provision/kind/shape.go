package kind

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/retry"

	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/provision/nodeshape"
)

// labelControlPlane marks, and taintControlPlane taints, kubeadm's control-plane
// nodes.
const (
	labelControlPlane = "node-role.kubernetes.io/control-plane"
	taintControlPlane = "node-role.kubernetes.io/control-plane"
)

// conflictBackoff spaces the attempts to update a node that others write too
// (its kubelet, the node controllers): 10ms, doubling up to 2s.
var conflictBackoff = wait.Backoff{Steps: 12, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: 2 * time.Second}

// waitNodes watches the nodes until there are at least want of them and every
// one is Ready, or ctx ends.
func waitNodes(ctx context.Context, nodes nodeshape.Nodes, want int) error {
	lw := kubeclient.ListWatch[*corev1.NodeList](nodes, nil)
	var ready map[string]bool
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, func(store cache.Store) (bool, error) {
		ready = map[string]bool{}
		for _, o := range store.List() {
			n := o.(*corev1.Node)
			ready[n.Name] = nodeReady(n)
		}
		return len(ready) >= want && !slices.Contains(slices.Collect(maps.Values(ready)), false), nil
	}, func(e watch.Event) (bool, error) {
		n, ok := e.Object.(*corev1.Node)
		if !ok {
			return false, nil
		}
		if e.Type == watch.Deleted {
			delete(ready, n.Name)
		} else {
			ready[n.Name] = nodeReady(n)
		}
		return len(ready) >= want && !slices.Contains(slices.Collect(maps.Values(ready)), false), nil
	})
	if err != nil {
		var waiting []string
		for name, ok := range ready {
			if !ok {
				waiting = append(waiting, name)
			}
		}
		sort.Strings(waiting)
		return fmt.Errorf("the nodes are not Ready (%d of %d joined; not Ready: %s): %w", len(ready), want, strings.Join(waiting, ", "), err)
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// shapeWorkers gives every node labelled LabelSimulate the shape of the
// instance type the label names, and returns the shapes by node name.
func shapeWorkers(ctx context.Context, nodes nodeshape.Nodes) (map[string]nodeshape.Shape, error) {
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: LabelSimulate})
	if err != nil {
		return nil, fmt.Errorf("list the workers to shape: %w", err)
	}
	shapes := map[string]nodeshape.Shape{}
	for _, n := range list.Items {
		s, err := nodeshape.ForType(n.Labels[LabelSimulate])
		if err != nil {
			return nil, fmt.Errorf("node %s, label %s: %w", n.Name, LabelSimulate, err)
		}
		if err := nodeshape.Apply(ctx, nodes, n.Name, s); err != nil {
			return nil, err
		}
		shapes[n.Name] = s
	}
	return shapes, nil
}

// recordedTypes returns the instance type each node labelled LabelSimulate
// records, by node name.
func recordedTypes(ctx context.Context, nodes nodeshape.Nodes) (map[string]string, error) {
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: LabelSimulate})
	if err != nil {
		return nil, err
	}
	types := map[string]string{}
	for _, n := range list.Items {
		types[n.Name] = n.Labels[LabelSimulate]
	}
	return types, nil
}

// sameWorkers reports whether the recorded instance types (by node) are those
// groups ask for, counts included.
func sameWorkers(recorded map[string]string, groups []Group) bool {
	want := workerTypes(groups)
	have := slices.Collect(maps.Values(recorded))
	slices.Sort(want)
	slices.Sort(have)
	return slices.Equal(want, have)
}

// groupsOf returns recorded instance types (by node) as groups, sorted by type.
func groupsOf(recorded map[string]string) []Group {
	counts := map[string]int{}
	for _, t := range recorded {
		counts[t]++
	}
	var groups []Group
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		groups = append(groups, Group{t, counts[t]})
	}
	return groups
}

// untaintControlPlane removes the control-plane NoSchedule taint from the
// control-plane nodes, so that pods which tolerate no accelerator taint (the
// controllers --with installs, steps without accelerators) have a node when
// every worker is an accelerator node. It returns the nodes it changed.
func untaintControlPlane(ctx context.Context, nodes nodeshape.Nodes) ([]string, error) {
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: labelControlPlane})
	if err != nil {
		return nil, fmt.Errorf("list the control-plane nodes: %w", err)
	}
	var changed []string
	for _, n := range list.Items {
		err := retry.RetryOnConflict(conflictBackoff, func() error {
			node, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			kept := slices.DeleteFunc(slices.Clone(node.Spec.Taints), func(t corev1.Taint) bool {
				return t.Key == taintControlPlane && t.Effect == corev1.TaintEffectNoSchedule
			})
			if len(kept) == len(node.Spec.Taints) {
				return nil
			}
			node.Spec.Taints = kept
			if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{FieldManager: "manifold-kind"}); err != nil {
				return err
			}
			changed = append(changed, n.Name)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("remove the control-plane taint of node %s: %w", n.Name, err)
		}
	}
	return changed, nil
}
