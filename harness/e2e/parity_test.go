package e2e_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// runShape is what must be the same in every pod that ran a step, whatever the
// target: the main container's image, command, arguments, environment and
// resources, and the pod's tolerations and node selector.
//
// Allowed differences, removed before comparing:
//   - Names, labels, annotations, owners and the pod's subdomain: each
//     controller names its own pods and labels them for itself (JobSet's
//     jobset.sigs.k8s.io/* labels and subdomain, the Job controller's job-name,
//     Argo's workflows.argoproj.io/* labels and annotations, the dag_id,
//     task_id, run_id, try_number and kubernetes_pod_operator labels of
//     Airflow's operators); none is compared.
//   - Argo's executor: its init and wait containers, volumes and mounts are
//     outside the main container's compared fields; the main container's
//     command is argoexec's, followed by "--" and the step's own command, which
//     is what is compared; the ARGO_* variables Argo adds to it are dropped.
//   - JOB_COMPLETION_INDEX, which the Job controller adds to the pods of every
//     Indexed Job: JobSet's Jobs are all Indexed, the job target's only for a
//     multi-node or foreach step.
//   - The rendezvous address of a multi-node step (MASTER_ADDR,
//     PET_MASTER_ADDR, NEURON_RT_ROOT_COMM_ID): rank 0's host name under the
//     job target's Service differs from its name under JobSet's; the variables
//     must be present on every target, their values are not compared.
//   - The argo target's MANIFOLD_BRACES, read from the flow's <flow>-literals
//     ConfigMap: the carrier of "{{" that every argo flow with params has; a
//     value that reads it differs in the values compared, so it is still
//     checked where it is used.
//   - An empty TRACEPARENT (argopod.Untraced, applied when comparing): the
//     argo and airflow targets deploy a flow once for every run, so every
//     step's container has the variable, filled from the run's parameters and
//     empty when the run is not traced; the kube runtime sets it on the
//     objects of a traced run only. A TRACEPARENT with a value is compared.
type runShape struct {
	Image       string
	Command     []string
	Args        []string
	Env         []corev1.EnvVar
	Resources   corev1.ResourceRequirements
	Tolerations []corev1.Toleration
	NodeSel     map[string]string
}

// envCompletionIndex is the variable the Job controller adds to the pods of an
// Indexed Job.
const envCompletionIndex = "JOB_COMPLETION_INDEX"

// argoExec is the program Argo's controller puts before a main container's
// command.
const argoExec = "/var/run/argo/argoexec"

// addressVars are the rendezvous variables whose values hold rank 0's address.
var addressVars = []string{plan.EnvMasterAddr, plan.EnvPETMasterAddr, plan.EnvNeuronRootComm}

// shape returns the compared fields of pod p, with the allowed differences
// removed.
func shape(p corev1.Pod) (runShape, error) {
	i := slices.IndexFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == plan.ContainerName })
	if i < 0 {
		return runShape{}, fmt.Errorf("pod %s has no container %q", p.Name, plan.ContainerName)
	}
	c := p.Spec.Containers[i]
	cmd := c.Command
	if len(cmd) > 0 && cmd[0] == argoExec {
		k := slices.Index(cmd, "--")
		if k < 0 {
			return runShape{}, fmt.Errorf("pod %s: argoexec command without --: %q", p.Name, cmd)
		}
		cmd = cmd[k+1:]
	}
	var env []corev1.EnvVar
	for _, e := range c.Env {
		switch {
		case strings.HasPrefix(e.Name, "ARGO_"), e.Name == envCompletionIndex:
			continue
		case e.Name == eargo.BracesEnv && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			continue
		case slices.Contains(addressVars, e.Name):
			e = corev1.EnvVar{Name: e.Name, Value: "(address)"}
		}
		env = append(env, e)
	}
	return runShape{
		Image: c.Image, Command: cmd, Args: c.Args, Env: env, Resources: c.Resources,
		Tolerations: p.Spec.Tolerations, NodeSel: p.Spec.NodeSelector,
	}, nil
}

// sameQuantity compares quantities by value, not by how they were written.
var sameQuantity = cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })

// checkParity compares, step by step, the pods that ran under each target in
// live (target → step → pods) with those that ran under the first of targets:
// the same number of pods, of the same shapes.
func checkParity(e *example, live map[string]map[string][]corev1.Pod) []string {
	var out []string
	shapes := func(pods []corev1.Pod) []runShape {
		var s []runShape
		for _, p := range pods {
			sh, err := shape(p)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			s = append(s, sh)
		}
		// Order the pods of a foreach step by their shape (their item differs).
		slices.SortFunc(s, func(a, b runShape) int {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			return strings.Compare(string(ja), string(jb))
		})
		return s
	}
	ref := targets[0]
	if live[ref] == nil {
		return []string{fmt.Sprintf("no pods ran under %s to compare with", ref)}
	}
	for _, s := range e.Steps {
		want := shapes(live[ref][s.Name])
		if len(want) == 0 {
			out = append(out, fmt.Sprintf("step %s: no pods ran under %s", s.Name, ref))
			continue
		}
		for _, target := range targets[1:] {
			pods, ok := live[target]
			if !ok {
				continue
			}
			if diff := cmp.Diff(want, shapes(pods[s.Name]), sameQuantity, argopod.Untraced); diff != "" {
				out = append(out, fmt.Sprintf("step %s: the pods that ran under %s differ from those under %s (-%s +%s):\n%s",
					s.Name, target, ref, ref, target, diff))
			}
		}
	}
	return out
}

// TestMutationParityToleration: neuron-train's prepare step without the flow's
// toleration in its JobSet still runs (the CPU nodes are not tainted), but
// checkParity catches the pods that ran under the two targets differing.
func TestMutationParityToleration(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "neuron-train")
	live := map[string]map[string][]corev1.Pod{}
	live["job"] = runOrdered(t, c, c.Namespace(t), e.compileTarget(t, "job")).pods
	objs := e.compileTarget(t, "jobset")
	for _, o := range objs {
		if o.GetLabels()[plan.LabelStep] != "prepare" {
			continue
		}
		rjs, _, _ := unstructured.NestedSlice(o.Object, "spec", "replicatedJobs")
		for _, rj := range rjs {
			unstructured.RemoveNestedField(rj.(map[string]any), "template", "spec", "template", "spec", "tolerations")
		}
		if err := unstructured.SetNestedSlice(o.Object, rjs, "spec", "replicatedJobs"); err != nil {
			t.Fatal(err)
		}
	}
	r := runOrdered(t, c, c.Namespace(t), objs)
	if problems := checkComplete(e, r); len(problems) > 0 {
		t.Fatalf("the mutated flow should still run: %q", problems)
	}
	live["jobset"] = r.pods
	problems := checkParity(e, live)
	if !containsAll(problems, "step prepare: the pods that ran under jobset differ from those under job", `{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"}`) {
		t.Errorf("checkParity did not catch the missing toleration: %q", problems)
	}
	for _, p := range problems {
		if !strings.HasPrefix(p, "step prepare:") {
			t.Errorf("checkParity reported a difference beyond prepare's toleration: %s", p)
		}
	}
}
