package e2e_test

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// The checks hold a run against the plan and return what differs, one line per
// problem, so that the harness tests can show each check catching a broken
// output.

// checkComplete: every step of the plan ran to completion.
func checkComplete(e *example, r *jobRun) []string {
	var out []string
	for _, s := range e.Steps {
		if _, ok := r.done[s.Name]; ok {
			continue
		}
		switch {
		case r.failed[s.Name] != "":
			out = append(out, fmt.Sprintf("step %s failed: %s", s.Name, r.failed[s.Name]))
		case r.pending[s.Name] != "":
			out = append(out, fmt.Sprintf("step %s was never scheduled: %s", s.Name, r.pending[s.Name]))
		default:
			out = append(out, fmt.Sprintf("step %s never ran", s.Name))
		}
	}
	return out
}

// checkPlacement: every pod of a step is bound to a node of the step's instance
// type (a step without one, to a plain CPU node), and a foreach step ran a pod
// per item.
func checkPlacement(e *example, r *jobRun) []string {
	var out []string
	for _, s := range e.Steps {
		pods, ran := r.pods[s.Name]
		if !ran {
			continue // checkComplete reports it
		}
		want := s.InstanceType
		if want == "" {
			want = simcluster.CPUInstanceType
		}
		for _, p := range pods {
			switch got := r.nodeType[p.Spec.NodeName]; {
			case p.Spec.NodeName == "":
				out = append(out, fmt.Sprintf("step %s: pod %s was not bound to a node", s.Name, p.Name))
			case got != want:
				out = append(out, fmt.Sprintf("step %s: pod %s was bound to %s, a %s node, want a %s node", s.Name, p.Name, p.Spec.NodeName, got, want))
			}
		}
		if want := max(s.Items, 1); len(pods) < want {
			out = append(out, fmt.Sprintf("step %s ran %d pods, want at least %d", s.Name, len(pods), want))
		}
	}
	return out
}

// checkResources: the container that ran asks for, and is limited to, exactly
// the plan's accelerators and EFA interfaces; a DRA step's pod claims them
// instead, with no device-plugin resources.
func checkResources(e *example, r *jobRun) []string {
	var out []string
	for _, s := range e.Steps {
		want := map[corev1.ResourceName]int{
			plan.ResourceNeuron: s.Neuron, plan.ResourceEFA: s.EFA, plan.ResourceNVIDIA: s.GPU,
		}
		if s.DRA {
			want = map[corev1.ResourceName]int{plan.ResourceNeuron: 0, plan.ResourceEFA: 0, plan.ResourceNVIDIA: 0}
		}
		for _, p := range r.pods[s.Name] {
			if s.DRA && (len(p.Spec.ResourceClaims) == 0 || len(p.Status.ResourceClaimStatuses) == 0) {
				out = append(out, fmt.Sprintf("step %s: pod %s claims no devices (claims %v, statuses %v)", s.Name, p.Name, p.Spec.ResourceClaims, p.Status.ResourceClaimStatuses))
			}
			i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == plan.ContainerName })
			if i < 0 {
				out = append(out, fmt.Sprintf("step %s: pod %s has no container %q", s.Name, p.Name, plan.ContainerName))
				continue
			}
			res := p.Spec.Containers[i].Resources
			for name, n := range want {
				for kind, list := range map[string]corev1.ResourceList{"limit": res.Limits, "request": res.Requests} {
					got := list[name]
					if got.Cmp(*resource.NewQuantity(int64(n), resource.DecimalSI)) != 0 {
						out = append(out, fmt.Sprintf("step %s: pod %s has %s %s %s, want %d", s.Name, p.Name, name, kind, got.String(), n))
					}
				}
			}
		}
	}
	return out
}

// checkOrder: no step's objects were created before every step it waits for (in
// the plan) had completed.
func checkOrder(e *example, r *jobRun) []string {
	var out []string
	for _, s := range e.Steps {
		created, ok := r.created[s.Name]
		if !ok {
			continue
		}
		for _, a := range s.After {
			done, ok := r.done[a]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("step %s started although step %s, which it waits for, never completed", s.Name, a))
			case created.Before(done):
				out = append(out, fmt.Sprintf("step %s started before step %s, which it waits for, completed", s.Name, a))
			}
		}
	}
	return out
}
