package e2e_test

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// exampleNamed returns the example called name.
func exampleNamed(t *testing.T, name string) *example {
	t.Helper()
	i := slices.IndexFunc(examples(t), func(e *example) bool { return e.Name == name })
	if i < 0 {
		t.Fatalf("no example %s", name)
	}
	return examples(t)[i]
}

// TestJobFailedStepStopsDependents makes hello's middle step fail (kwok fails
// pods labelled sim.manifold.dev/fail): its Job fails and the step after it is
// never created.
func TestJobFailedStepStopsDependents(t *testing.T) {
	c := simcluster.Shared(t)
	e := exampleNamed(t, "hello")
	objs := mutate(t, e.compileTarget(t, "job"), "shout", func(j *batchv1.Job) {
		j.Spec.Template.Labels[simcluster.LabelFail] = "true"
	})
	r := runOrdered(t, c, c.Namespace(t), objs)
	if _, ok := r.done["greet"]; !ok {
		t.Errorf("greet did not complete: %v", checkComplete(e, r))
	}
	if !strings.Contains(r.failed["shout"], "BackoffLimitExceeded") {
		t.Errorf("shout: want its Job failed with BackoffLimitExceeded, got %q", r.failed["shout"])
	}
	if _, ok := r.created["echo"]; ok {
		t.Error("echo was created although shout, which it waits for, failed")
	}
}

// TestJobEFAOverInstanceStaysPending shows what the compiler's EFA limit
// prevents: a trn1.32xlarge step asking 32 EFA interfaces (the instance has 8)
// is never scheduled, and the scheduler says why.
func TestJobEFAOverInstanceStaysPending(t *testing.T) {
	c := simcluster.Shared(t)
	flow := func(efa int) *sdk.Flow {
		return sdk.NewFlow("efa", sdk.Image("busybox")).
			Step("train", sdk.Command("true"), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(efa))
	}
	if _, errs := compile.Compile(flow(32), compile.Options{}); len(errs) == 0 {
		t.Fatal("the compiler accepted EFA(32) on a trn1.32xlarge")
	}
	p, errs := compile.Compile(flow(8), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	emitted, errs := job.Objects(p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	objs := []*unstructured.Unstructured{fromJob(t, emitted[0].(*batchv1.Job))}
	objs = mutate(t, objs, "train", func(j *batchv1.Job) {
		res := &j.Spec.Template.Spec.Containers[0].Resources
		res.Requests[plan.ResourceEFA] = resource.MustParse("32")
		res.Limits[plan.ResourceEFA] = resource.MustParse("32")
	})
	r := runOrdered(t, c, c.Namespace(t), objs)
	if msg := r.pending["train"]; !strings.Contains(msg, "Insufficient "+plan.ResourceEFA) {
		t.Errorf("want train Pending with Insufficient %s, got pending %q (done: %v, failed: %q)", plan.ResourceEFA, msg, keys(r.done), r.failed["train"])
	}
}

// The mutation tests break one thing in neuron-train's correct Job output and
// show the checks of TestExamples failing on it, so a target that emitted
// the broken form could not pass.

func neuronTrain(t *testing.T) (*example, []*unstructured.Unstructured) {
	e := exampleNamed(t, "neuron-train")
	return e, e.compileTarget(t, "job")
}

// TestMutationNoNeuronToleration: without the Neuron toleration the train pod is
// never bound, so checkComplete fails.
func TestMutationNoNeuronToleration(t *testing.T) {
	c := simcluster.Shared(t)
	e, objs := neuronTrain(t)
	objs = mutate(t, objs, "train", func(j *batchv1.Job) {
		spec := &j.Spec.Template.Spec
		n := len(spec.Tolerations)
		spec.Tolerations = slices.DeleteFunc(spec.Tolerations, func(tol corev1.Toleration) bool { return tol.Key == plan.ResourceNeuron })
		if len(spec.Tolerations) == n {
			t.Fatal("train has no Neuron toleration to remove")
		}
	})
	r := runOrdered(t, c, c.Namespace(t), objs)
	// The scheduler counts the trn1 nodes (the only ones matching the selector)
	// among those whose taints the pod does not tolerate.
	if !strings.Contains(r.pending["train"], "untolerated taint") {
		t.Errorf("want train unschedulable for an untolerated taint, got %q", r.pending["train"])
	}
	if problems := checkComplete(e, r); !containsAll(problems, "step train was never scheduled", "step evaluate never ran") {
		t.Errorf("checkComplete did not catch the missing toleration: %q", problems)
	}
}

// TestMutationNoLimits: without its Neuron and EFA requests and limits the
// train pod still lands on a trn1 node, but checkResources catches it.
func TestMutationNoLimits(t *testing.T) {
	c := simcluster.Shared(t)
	e, objs := neuronTrain(t)
	objs = mutate(t, objs, "train", func(j *batchv1.Job) {
		res := &j.Spec.Template.Spec.Containers[0].Resources
		for _, l := range []corev1.ResourceList{res.Requests, res.Limits} {
			delete(l, plan.ResourceNeuron)
			delete(l, plan.ResourceEFA)
		}
	})
	r := runOrdered(t, c, c.Namespace(t), objs)
	if problems := checkComplete(e, r); len(problems) > 0 {
		t.Fatalf("the mutated flow should still run: %q", problems)
	}
	if problems := checkResources(e, r); !containsAll(problems,
		"step train: pod neuron-train-train-", "has aws.amazon.com/neuron limit 0, want 16", "has vpc.amazonaws.com/efa limit 0, want 8") {
		t.Errorf("checkResources did not catch the missing limits: %q", problems)
	}
}

// TestMutationBrokenOrder: without its manifold.dev/after annotation evaluate
// starts with prepare, before train has completed, and checkOrder catches it.
func TestMutationBrokenOrder(t *testing.T) {
	c := simcluster.Shared(t)
	e, objs := neuronTrain(t)
	objs = mutate(t, objs, "evaluate", func(j *batchv1.Job) {
		delete(j.Annotations, plan.AnnotationAfter)
	})
	r := runOrdered(t, c, c.Namespace(t), objs)
	if problems := checkOrder(e, r); !containsAll(problems, "step evaluate started before step train, which it waits for, completed") {
		t.Errorf("checkOrder did not catch the broken order: %q", problems)
	}
}

// containsAll reports whether every want is a substring of some line.
func containsAll(lines []string, want ...string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, w) }) {
			return false
		}
	}
	return true
}
