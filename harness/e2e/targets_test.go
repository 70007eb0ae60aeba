package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// The targets each example runs on. "argo-job" is the argo target compiled with
// argo_multi_node = "job": a multi-node step's resource templates create the job
// target's Service and Indexed Job instead of a JobSet.
var targets = []string{"job", "jobset", "argo", "argo-job", "airflow"}

// argoJobConfig is the manifold.toml of the argo-job target.
const argoJobConfig = `argo_multi_node = "job"`

// TestExamples runs every example (neuron-train and gpu-efa train on two nodes) on
// every target, in a namespace labelled with the Pod Security level the example
// needs (podSecurityLevel: restricted, but privileged for EFA wiring), so that
// every pod, the Argo executor's containers and the Airflow operator's pod
// included, is admitted at that level: the Jobs and the JobSets in the order their
// manifold.dev/after annotations give, and the WorkflowTemplate submitted as a
// Workflow. Every object must be accepted by the API server (created with
// strict field validation); every step must complete, on nodes of its instance
// type only, with the plan's accelerators, after the steps it waits for, a
// multi-node step's pods on distinct nodes. The Airflow DAG runs with `airflow
// dags test`: its KubernetesPodOperator and KubernetesJobOperator tasks create
// the pods, and every task must succeed. Then the pods that ran for each step
// under each target are compared (see parity).
//
// Examples run in parallel, except that two runs needing the same accelerator
// instance type take turns, so that neither waits for nodes the other holds;
// an example's targets run one after the other.
func TestExamples(t *testing.T) {
	c := simcluster.Shared(t)
	// The trn2 nodes publish their devices through the DRA drivers too, for the
	// examples that claim them (neuron-dra).
	if err := c.InstallNeuronDRA(context.Background(), "trn2.48xlarge"); err != nil {
		t.Fatal(err)
	}
	for _, e := range examples(t) {
		t.Run(e.Name, func(t *testing.T) {
			t.Parallel()
			defer lockTypes(e)()
			live := map[string]map[string][]corev1.Pod{}
			for _, target := range targets {
				t.Run(target, func(t *testing.T) {
					ns := c.LabelledNamespace(t, map[string]string{podSecurityEnforce: podSecurityLevel(e)})
					r := runTarget(t, c, ns, e, target)
					for _, check := range []func(*example, *jobRun) []string{checkComplete, checkPlacement, checkResources, checkOrder, checkDistinctNodes} {
						for _, problem := range check(e, r) {
							t.Error(problem)
						}
					}
					if len(r.order) != len(e.Steps) {
						t.Errorf("ran steps %v, the plan has %d", r.order, len(e.Steps))
					}
					live[target] = r.pods
				})
			}
			t.Run("parity", func(t *testing.T) {
				for _, target := range targets {
					if live[target] == nil {
						t.Errorf("no pods ran under %s to compare", target)
					}
				}
				for _, problem := range checkParity(e, live) {
					t.Error(problem)
				}
			})
		})
	}
}

// podSecurityEnforce is the namespace label that sets the Pod Security level
// admission enforces.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// podSecurityLevel is the level every pod of e meets: restricted, but
// privileged when a step has EFA wiring, whose IPC_LOCK capability no other
// level allows.
func podSecurityLevel(e *example) string {
	for _, s := range e.Steps {
		if s.Wired {
			return "privileged"
		}
	}
	return "restricted"
}

// runTarget compiles e for target and runs it in namespace ns.
func runTarget(t *testing.T, c *simcluster.Cluster, ns string, e *example, target string) *jobRun {
	t.Helper()
	e = sideBySide(e)
	switch target {
	case "job", "jobset":
		return runOrdered(t, c, ns, e.compileTarget(t, target))
	case "airflow":
		r := runAirflow(t, c, ns, e, nil)
		if r.state != "success" {
			t.Errorf("DAG run ended %q, want success; tasks %v\n%s", r.state, r.states, r.log)
		}
		for task, states := range r.states {
			for i, s := range states {
				if s != "success" {
					t.Errorf("task %s instance %d ended %s", task, i, s)
				}
			}
		}
		return r.jobRun
	}
	if target == "argo-job" {
		v := *e
		v.config = argoJobConfig + "\n" + e.config
		e = &v
	}
	objs := e.compileTarget(t, "argo")
	wr := runWorkflow(t, c, ns, objs)
	if wr.phase != "Succeeded" {
		t.Errorf("Workflow %s ended %s: %v", wr.name, wr.phase, wr.failed)
	}
	runResourceManifests(t, c, ns, e, objs, wr)
	return wr.jobRun
}

// sideBySide returns e compiled so that its pods keep running for a moment when
// it has a multi-node step: kwok completes a pod as soon as it is bound, and the
// scheduler no longer counts a finished pod against the required anti-affinity,
// so a step's second pod could otherwise take the node its first just left.
func sideBySide(e *example) *example {
	for _, s := range e.Steps {
		if s.Nodes > 1 {
			v := *e
			v.config = e.config + "\n[labels]\n\"" + simcluster.LabelRunFor + "\" = \"2s\""
			return &v
		}
	}
	return e
}

// runResourceManifests stands in for what kwok cannot do. The executor pod of a
// multi-node step's resource template "succeeds" at once, as every pod does here,
// without creating anything; so the test substitutes the template's manifest
// with Argo's own code for the Workflow's uid, creates the objects on the
// cluster and runs them to completion, and takes their pods as the step's.
func runResourceManifests(t *testing.T, c *simcluster.Cluster, ns string, e *example, objs []*unstructured.Unstructured, wr *workflowRun) {
	t.Helper()
	var multi []string
	for _, s := range e.Steps {
		if s.Nodes > 1 {
			multi = append(multi, s.Name)
		}
	}
	if len(multi) == 0 {
		return
	}
	manifests := resourceManifests(t, objs, wr.uid)
	for _, s := range multi {
		ms := manifests[s]
		if len(ms) == 0 {
			t.Errorf("step %s runs on %d nodes, but no resource template creates its objects", s, e.step(s).Nodes)
			continue
		}
		for _, m := range ms {
			// Argo's DAG orders the step; the annotation is for the job and
			// jobset targets' runners.
			ann := m.GetAnnotations()
			delete(ann, plan.AnnotationAfter)
			m.SetAnnotations(ann)
		}
		mr := runOrdered(t, c, ns, ms)
		if _, ok := mr.done[s]; !ok {
			t.Errorf("step %s: the objects its resource template creates did not complete: %s%s", s, mr.failed[s], mr.pending[s])
		}
		wr.pods[s] = slices.DeleteFunc(mr.pods[s], func(p corev1.Pod) bool { return p.Labels[labelWorkflow] != "" })
	}
}

var typeLocks sync.Map // instance type → *sync.Mutex

// lockTypes takes the lock of every accelerator instance type e's steps use, in
// order, and returns the function that releases them.
func lockTypes(e *example) func() {
	var types []string
	for _, s := range e.Steps {
		if s.InstanceType != "" && !slices.Contains(types, s.InstanceType) {
			types = append(types, s.InstanceType)
		}
	}
	slices.Sort(types)
	var held []*sync.Mutex
	for _, it := range types {
		m, _ := typeLocks.LoadOrStore(it, new(sync.Mutex))
		m.(*sync.Mutex).Lock()
		held = append(held, m.(*sync.Mutex))
	}
	return func() {
		for _, m := range held {
			m.Unlock()
		}
	}
}

// checkDistinctNodes: the pods of each Indexed Job of a multi-node step (one per
// node, as many as the step's nodes) are bound to distinct nodes.
func checkDistinctNodes(e *example, r *jobRun) []string {
	var out []string
	for _, s := range e.Steps {
		if s.Nodes < 2 {
			continue
		}
		byJob := map[string][]corev1.Pod{}
		for _, p := range r.pods[s.Name] {
			byJob[p.Labels["batch.kubernetes.io/job-name"]] = append(byJob[p.Labels["batch.kubernetes.io/job-name"]], p)
		}
		if len(byJob) == 0 {
			out = append(out, fmt.Sprintf("step %s: no pods of an Indexed Job", s.Name))
		}
		for job, pods := range byJob {
			nodes := map[string]bool{}
			for _, p := range pods {
				nodes[p.Spec.NodeName] = true
			}
			if len(pods) != s.Nodes || len(nodes) != s.Nodes {
				var where []string
				for _, p := range pods {
					where = append(where, p.Name+"@"+p.Spec.NodeName)
				}
				out = append(out, fmt.Sprintf("step %s: Job %s ran %d pods on %d distinct nodes, want %d on %d: %s",
					s.Name, job, len(pods), len(nodes), s.Nodes, s.Nodes, strings.Join(where, ", ")))
			}
		}
	}
	return out
}
