package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/plan"
)

// spreadTogether says why the nodes that can take a pod of multi-node step s
// (fit, by name) cannot hold all its pods as its placement terms ask — each on
// a node of its own value of s.Apart, all in one value of s.Together — or "".
// It counts what the scheduler's inter-pod affinity filter enforces: a node
// without one of those labels takes none of the pods.
func spreadTogether(s *plan.Step, nodes []corev1.Node, fit []string) string {
	if s.Nodes <= 1 || (s.Apart == "" && s.Together == "") {
		return ""
	}
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	// domains maps each value of Together ("" for one domain when the step has
	// none) to the values of Apart its nodes have.
	domains := map[string]map[string]bool{}
	unlabelled := 0
	for _, name := range fit {
		n := byName[name]
		apart, okA := label(n, s.Apart)
		together, okT := label(n, s.Together)
		if !okA || !okT {
			unlabelled++
			continue
		}
		if domains[together] == nil {
			domains[together] = map[string]bool{}
		}
		domains[together][apart] = true
	}
	for _, d := range domains {
		if len(d) >= s.Nodes {
			return ""
		}
	}
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(domains)) {
		if s.Together == "" {
			parts = append(parts, fmt.Sprintf("%d", len(domains[v])))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d in %s", len(domains[v]), v))
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	if unlabelled > 0 {
		parts = append(parts, fmt.Sprintf("%d without the label%s", unlabelled, labelsNamed(s)))
	}
	what := fmt.Sprintf("its %d pods go one per %s", s.Nodes, s.Apart)
	if s.Together != "" {
		what += fmt.Sprintf(" and all in one %s", s.Together)
		if s.EFA > 0 {
			what += " (EFA does not leave a zone; sdk.AnyZone() lets them span zones)"
		}
		return fmt.Sprintf("%s, and no %s has %d such nodes that can take its pod (%s)", what, s.Together, s.Nodes, strings.Join(parts, "; "))
	}
	return fmt.Sprintf("%s, and the nodes that can take its pod have %s distinct values", what, strings.Join(parts, "; "))
}

func label(n *corev1.Node, key string) (string, bool) {
	if key == "" {
		return "", true
	}
	v, ok := n.Labels[key]
	return v, ok
}

func labelsNamed(s *plan.Step) string {
	var keys []string
	for _, k := range []string{s.Apart, s.Together} {
		if k != "" {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	return " " + strings.Join(keys, " or ")
}
