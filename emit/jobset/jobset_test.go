package jobset_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func jobSets(t *testing.T, p *plan.Flow) []*jobsetv1.JobSet {
	t.Helper()
	objs, errs := jobset.Objects(p)
	if len(errs) > 0 {
		t.Fatalf("Objects: %v", errs)
	}
	var out []*jobsetv1.JobSet
	for _, o := range objs {
		out = append(out, o.(*jobsetv1.JobSet))
	}
	return out
}

func trainFlow(train ...sdk.StepOption) *sdk.Flow {
	return sdk.NewFlow("neuron-train", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3")).
		Step("prepare", sdk.Command("true")).
		Step("train", append([]sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.After("prepare"),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(6 * time.Hour)},
			train...)...)
}

func TestEveryStepIsAJobSet(t *testing.T) {
	p := testflows.Compile(t, trainFlow(sdk.Nodes(2)))
	sets := jobSets(t, p)
	var names []string
	for _, js := range sets {
		names = append(names, js.Name)
	}
	if diff := cmp.Diff([]string{"neuron-train-prepare", "neuron-train-train"}, names); diff != "" {
		t.Fatalf("JobSets are not one per step in dependency order (-want +got):\n%s", diff)
	}

	prepare, train := sets[0], sets[1]
	if train.Annotations[plan.AnnotationAfter] != "prepare" || prepare.Annotations != nil {
		t.Errorf("after annotations: prepare %v, train %v", prepare.Annotations, train.Annotations)
	}
	if train.Spec.FailurePolicy == nil || train.Spec.FailurePolicy.MaxRestarts != 2 || prepare.Spec.FailurePolicy != nil {
		t.Errorf("Retry(2) must be failurePolicy.maxRestarts 2 on train only: train %+v, prepare %+v", train.Spec.FailurePolicy, prepare.Spec.FailurePolicy)
	}
	if n := train.Spec.Network; n == nil || n.EnableDNSHostnames == nil || !*n.EnableDNSHostnames {
		t.Errorf("train network = %+v, want DNS host names", n)
	}

	rjs := train.Spec.ReplicatedJobs
	if len(rjs) != 1 || rjs[0].Name != "node" || rjs[0].Replicas != 1 {
		t.Fatalf("train replicated jobs = %+v, want one called node with one replica", rjs)
	}
	spec := rjs[0].Template.Spec
	want := batchv1.JobSpec{
		CompletionMode:        new(batchv1.IndexedCompletion),
		Completions:           new(int32(2)),
		Parallelism:           new(int32(2)),
		BackoffLimit:          new(int32(0)),
		ActiveDeadlineSeconds: new(int64(6 * 3600)),
		// Each node runs the step's pod, its rendezvous pointing at rank 0.
		Template: emit.Pod(p, p.Step("train"), emit.PodOptions{MasterAddr: "neuron-train-train-node-0-0.neuron-train-train"}),
	}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("train Job spec (-want +got):\n%s", diff)
	}

	// A single-node step runs the plain pod, without rendezvous.
	if diff := cmp.Diff(emit.Pod(p, p.Step("prepare"), emit.PodOptions{}), prepare.Spec.ReplicatedJobs[0].Template.Spec.Template); diff != "" {
		t.Errorf("prepare pod (-want +got):\n%s", diff)
	}
	if c := prepare.Spec.ReplicatedJobs[0].Template.Spec.Completions; c == nil || *c != 1 {
		t.Errorf("prepare completions = %v, want 1", c)
	}
}

func TestForeachIsAReplicatedJobPerItem(t *testing.T) {
	p := testflows.Compile(t, sdk.NewFlow("sweep", sdk.Image("busybox")).
		Step("train", sdk.Command("true"), sdk.Foreach("a", "b"), sdk.Nodes(2)))
	js := jobSets(t, p)[0]
	if len(js.Spec.ReplicatedJobs) != 2 {
		t.Fatalf("replicated jobs = %d, want 2", len(js.Spec.ReplicatedJobs))
	}
	for i, rj := range js.Spec.ReplicatedJobs {
		if want := fmt.Sprintf("item%d", i); rj.Name != want {
			t.Errorf("replicated job %d is called %q, want %q", i, rj.Name, want)
		}
		if rj.Template.Labels[plan.LabelIndex] != fmt.Sprint(i) {
			t.Errorf("replicated job %d labels = %v", i, rj.Template.Labels)
		}
		wantPod := emit.Pod(p, p.Step("train"), emit.PodOptions{
			Item:       emit.ItemAt(p.Step("train"), i),
			MasterAddr: fmt.Sprintf("sweep-train-item%d-0-0.sweep-train", i),
		})
		if diff := cmp.Diff(wantPod, rj.Template.Spec.Template); diff != "" {
			t.Errorf("item %d pod (-want +got):\n%s", i, diff)
		}
	}
}

func TestScheduleIsRefused(t *testing.T) {
	p := testflows.Compile(t, sdk.NewFlow("nightly", sdk.Image("busybox"), sdk.Schedule("@daily")).Step("a", sdk.Command("true")))
	_, errs := jobset.Objects(p)
	if diff := cmp.Diff(field.ErrorList{field.Forbidden(field.NewPath("schedule"), "")}, errs,
		cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestNamesFit: the names of the Jobs and pods JobSet makes from a JobSet must be
// DNS-1035 labels however long the names, however many the nodes and items.
func TestNamesFit(t *testing.T) {
	long := strings.Repeat("x", compile.MaxNameLength)
	for _, tc := range []struct {
		nodes, items int
	}{{1, 0}, {2, 0}, {compile.MaxNodes, 0}, {1, 1}, {16, 1000}} {
		opts := []sdk.StepOption{sdk.Command("true"), sdk.Nodes(tc.nodes)}
		if tc.items > 0 {
			items := make([]string, tc.items)
			for i := range items {
				items[i] = fmt.Sprint(i)
			}
			opts = append(opts, sdk.Foreach(items...))
		}
		js := jobSets(t, testflows.Compile(t, sdk.NewFlow(long, sdk.Image("busybox")).Step(long, opts...)))[0]
		for _, rj := range js.Spec.ReplicatedJobs {
			pod := fmt.Sprintf("%s-%s-0-%d-abcde", js.Name, rj.Name, tc.nodes-1)
			if errs := validation.IsDNS1035Label(pod); len(errs) > 0 {
				t.Errorf("nodes %d, items %d: pod name %q: %v", tc.nodes, tc.items, pod, errs)
			}
		}
	}
}

// TestDecodesStrictly: the YAML decodes into the JobSet API types with no unknown
// field and back to the same objects.
func TestDecodesStrictly(t *testing.T) {
	p := testflows.Compile(t, trainFlow(sdk.Nodes(2), sdk.Foreach("a", "b")))
	files, errs := emit.Files(jobset.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	docs := strings.Split(string(files[0].Data), "\n---\n")[1:] // the first part is the header
	want := jobSets(t, p)
	if len(docs) != len(want) {
		t.Fatalf("%d documents, want %d", len(docs), len(want))
	}
	for i, doc := range docs {
		var got jobsetv1.JobSet
		if err := yaml.UnmarshalStrict([]byte(doc), &got); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if diff := cmp.Diff(want[i], &got); diff != "" {
			t.Errorf("document %d (-emitted +decoded):\n%s", i, diff)
		}
	}
}

// TestAcceptedByJobSetValidation runs JobSet's own webhooks and the API server's
// Job validation over shapes that use every option, the longest names and many nodes.
func TestAcceptedByJobSetValidation(t *testing.T) {
	long := strings.Repeat("x", compile.MaxNameLength)
	flows := map[string]*sdk.Flow{
		"train": trainFlow(sdk.Nodes(4), sdk.SharedMemory("64Gi"), sdk.Volume("data", "/data"), sdk.Env("A", "1"),
			sdk.SecretEnv("T", "hf", "token"), sdk.Label("team", "ml"), sdk.Namespace("ml"), sdk.Port(1234)),
		"longest": sdk.NewFlow(long, sdk.Image("busybox")).
			Step(long, sdk.Command("true"), sdk.Nodes(compile.MaxNodes)).
			Step("sweep", sdk.Command("true"), sdk.Foreach("a", "b", "c"), sdk.Nodes(2), sdk.After(long)),
	}
	dir := t.TempDir()
	var paths []string
	for name, f := range flows {
		paths = append(paths, write(t, dir, name, testflows.Compile(t, f)))
	}
	if out, ok := kubevalidate.Run(t, paths...); !ok {
		t.Errorf("JobSet validation refuses jobset target output:\n%s", out)
	}
}

// TestBrokenJobSetIsRefused shows the check can fail, for the reason JobSet's webhook
// or the API server's Job validation gives.
func TestBrokenJobSetIsRefused(t *testing.T) {
	p := testflows.Compile(t, trainFlow())
	dir := t.TempDir()
	for _, tc := range []struct {
		name, why string
		breakIt   func(*jobsetv1.JobSet)
	}{
		{"job names too long", "job names generated for this JobSet will exceed 63 characters",
			func(js *jobsetv1.JobSet) { js.Spec.ReplicatedJobs[0].Name = strings.Repeat("n", 60) }},
		{"dependency on nothing", "DependsOn can't be set for the first ReplicatedJob",
			func(js *jobsetv1.JobSet) {
				js.Spec.ReplicatedJobs[0].DependsOn = []jobsetv1.DependsOn{{Name: "x", Status: jobsetv1.DependencyComplete}}
			}},
		{"no container image", "containers[0].image: Required value",
			func(js *jobsetv1.JobSet) {
				js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Image = ""
			}},
	} {
		name := tc.name
		js := jobset.JobSet(p, p.Step("train"))
		tc.breakIt(js)
		data, err := encode.YAML("", js)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, ok := kubevalidate.Run(t, path); ok || !strings.Contains(out, tc.why) {
			t.Errorf("%s: accepted %t, want refused for %q:\n%s", name, ok, tc.why, out)
		}
	}
}

func write(t *testing.T, dir, name string, p *plan.Flow) string {
	t.Helper()
	files, errs := emit.Files(jobset.Target{}, p)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", name, errs)
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, files[0].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestHeaderSaysHowToRunInOrder checks that the file's header says how to run
// its JobSets in order: run --kube, or the kubectl wait of a JobSet's own
// completion condition.
func TestHeaderSaysHowToRunInOrder(t *testing.T) {
	files, errs := emit.Files(jobset.Target{}, testflows.Compile(t, trainFlow()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	header, _, _ := strings.Cut(string(files[0].Data), "\n---\n")
	for _, want := range []string{"run --kube", "kubectl wait --for=condition=" + string(jobsetv1.JobSetCompleted) + " jobset/"} {
		if !strings.Contains(header, want) {
			t.Errorf("the header does not say %q:\n%s", want, header)
		}
	}
	for _, l := range strings.Split(header, "\n") {
		if !strings.HasPrefix(l, "#") {
			t.Errorf("header line %q is no YAML comment", l)
		}
	}
}
