package job_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/sdk"
)

func objects(t *testing.T, f *sdk.Flow) []any {
	t.Helper()
	objs, errs := job.Objects(testflows.Compile(t, f))
	if len(errs) > 0 {
		t.Fatalf("Objects: %v", errs)
	}
	return objs
}

func kindsAndNames(objs []any) []string {
	var out []string
	for _, o := range objs {
		switch o := o.(type) {
		case *batchv1.Job:
			out = append(out, "Job "+o.Name)
		case *corev1.Service:
			out = append(out, "Service "+o.Name)
		default:
			out = append(out, fmt.Sprintf("%T", o))
		}
	}
	return out
}

func TestMultiNodeStepIsAnIndexedJobWithItsService(t *testing.T) {
	f := neuronFlow(sdk.Nodes(2))
	objs := objects(t, f)
	want := []string{"Job neuron-train-prepare", "Service neuron-train-train", "Job neuron-train-train", "Job neuron-train-evaluate"}
	if diff := cmp.Diff(want, kindsAndNames(objs)); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
	svc, train := objs[1].(*corev1.Service), objs[2].(*batchv1.Job)

	spec := train.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion ||
		spec.Completions == nil || *spec.Completions != 2 || spec.Parallelism == nil || *spec.Parallelism != 2 {
		t.Errorf("train is not an Indexed Job of 2 pods at once: mode %v, completions %v, parallelism %v",
			spec.CompletionMode, spec.Completions, spec.Parallelism)
	}
	if spec.BackoffLimit != nil || spec.BackoffLimitPerIndex == nil || *spec.BackoffLimitPerIndex != 2 ||
		spec.MaxFailedIndexes == nil || *spec.MaxFailedIndexes != 0 {
		t.Errorf("Retry(2) must retry each node twice and fail the Job at the first node that fails for good: backoffLimit %v, perIndex %v, maxFailedIndexes %v",
			spec.BackoffLimit, spec.BackoffLimitPerIndex, spec.MaxFailedIndexes)
	}

	// Each node's pod is the step's pod, with rank 0's address in its rendezvous
	// variables, plus the subdomain that gives it a DNS name.
	p := testflows.Compile(t, f)
	wantPod := emit.Pod(p, p.Step("train"), emit.PodOptions{MasterAddr: "neuron-train-train-0.neuron-train-train"})
	wantPod.Spec.Subdomain = svc.Name
	if diff := cmp.Diff(wantPod, spec.Template); diff != "" {
		t.Errorf("train pod (-want +got):\n%s", diff)
	}

	wantSvc := corev1.ServiceSpec{
		ClusterIP:                corev1.ClusterIPNone,
		ClusterIPs:               []string{corev1.ClusterIPNone},
		Selector:                 map[string]string{"batch.kubernetes.io/job-name": train.Name},
		PublishNotReadyAddresses: true,
		Ports:                    []corev1.ServicePort{{Name: "rendezvous", Port: 29500, TargetPort: intstr.FromInt32(29500), Protocol: corev1.ProtocolTCP}},
	}
	if diff := cmp.Diff(wantSvc, svc.Spec); diff != "" {
		t.Errorf("service (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(train.Labels, svc.Labels); diff != "" {
		t.Errorf("service labels differ from the Job's (-job +service):\n%s", diff)
	}
}

func TestMultiNodeForeachHasAServicePerItem(t *testing.T) {
	f := sdk.NewFlow("sweep", sdk.Image("busybox")).Step("train", sdk.Command("true"), sdk.Foreach("a", "b"), sdk.Nodes(3))
	objs := objects(t, f)
	want := []string{"Service sweep-train-0", "Job sweep-train-0", "Service sweep-train-1", "Job sweep-train-1"}
	if diff := cmp.Diff(want, kindsAndNames(objs)); diff != "" {
		t.Fatalf("objects (-want +got):\n%s", diff)
	}
	env := map[string]string{}
	for _, e := range objs[3].(*batchv1.Job).Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["MANIFOLD_ITEM"] != "b" || env["MASTER_ADDR"] != "sweep-train-1-0.sweep-train-1" || env["MANIFOLD_NUM_NODES"] != "3" {
		t.Errorf("item 1's env = %v", env)
	}
}

// TestMultiNodeHostNamesFit: a pod's host name is its Job's name and its rank, and
// must be a DNS label however long the names and however many the nodes.
func TestMultiNodeHostNamesFit(t *testing.T) {
	long := strings.Repeat("x", compile.MaxNameLength)
	for _, nodes := range []int{2, 10, 11, 1000, compile.MaxNodes} {
		f := sdk.NewFlow(long, sdk.Image("busybox")).Step(long, sdk.Command("true"), sdk.Nodes(nodes), sdk.Foreach("a"))
		for _, j := range jobs(t, testflows.Compile(t, f)) {
			host := fmt.Sprintf("%s-%d", j.Name, nodes-1)
			if errs := validation.IsDNS1123Label(host); len(errs) > 0 {
				t.Errorf("nodes %d: host name %q: %v", nodes, host, errs)
			}
			if errs := validation.IsDNS1035Label(j.Spec.Template.Spec.Subdomain); len(errs) > 0 {
				t.Errorf("nodes %d: service name %q: %v", nodes, j.Spec.Template.Spec.Subdomain, errs)
			}
		}
	}
}

func TestScheduledMultiNodeStepIsRefused(t *testing.T) {
	p := testflows.Compile(t, sdk.NewFlow("nightly", sdk.Image("busybox"), sdk.Schedule("@daily")).
		Step("train", sdk.Command("true"), sdk.Nodes(2)))
	_, errs := job.Objects(p)
	if diff := cmp.Diff(field.ErrorList{field.Forbidden(field.NewPath("schedule"), "")}, errs, cmpIgnoreDetail); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
