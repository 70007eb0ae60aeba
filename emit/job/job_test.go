package job_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func jobs(t *testing.T, p *plan.Flow) []*batchv1.Job {
	t.Helper()
	objs, errs := job.Objects(p)
	if len(errs) > 0 {
		t.Fatalf("Objects: %v", errs)
	}
	var out []*batchv1.Job
	for _, o := range objs {
		if j, ok := o.(*batchv1.Job); ok {
			out = append(out, j)
		}
	}
	return out
}

func neuronFlow(train ...sdk.StepOption) *sdk.Flow {
	return sdk.NewFlow("neuron-train", sdk.Image("example.com/flow:v1"),
		sdk.Toleration("dedicated", "ml", "NoSchedule")).
		Step("evaluate", sdk.Run(func(*sdk.Context) error { return nil }), sdk.After("train"), sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1)).
		Step("prepare", sdk.Command("true")).
		Step("train", append([]sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.After("prepare"),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(6 * time.Hour)},
			train...)...)
}

func TestTrainJob(t *testing.T) {
	js := jobs(t, testflows.Compile(t, neuronFlow()))
	var names []string
	for _, j := range js {
		names = append(names, j.Name)
	}
	if diff := cmp.Diff([]string{"neuron-train-prepare", "neuron-train-train", "neuron-train-evaluate"}, names); diff != "" {
		t.Fatalf("jobs are not in dependency order (-want +got):\n%s", diff)
	}
	train := js[1]
	c := train.Spec.Template.Spec.Containers[0]
	for _, l := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		if diff := cmp.Diff(corev1.ResourceList{
			"aws.amazon.com/neuron": resource.MustParse("16"),
			"vpc.amazonaws.com/efa": resource.MustParse("8"),
		}, l); diff != "" {
			t.Errorf("train resources (-want +got):\n%s", diff)
		}
	}
	wantTol := []corev1.Toleration{
		{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"},
		{Key: "aws.amazon.com/neuron", Operator: "Exists", Effect: "NoSchedule"},
	}
	if diff := cmp.Diff(wantTol, train.Spec.Template.Spec.Tolerations); diff != "" {
		t.Errorf("train tolerations (-want +got):\n%s", diff)
	}
	if got := train.Spec.Template.Spec.NodeSelector["node.kubernetes.io/instance-type"]; got != "trn1.32xlarge" {
		t.Errorf("train instance type selector = %q", got)
	}
	if got := *train.Spec.BackoffLimit; got != 2 {
		t.Errorf("backoffLimit = %d, want 2", got)
	}
	if got := *train.Spec.Template.Spec.ActiveDeadlineSeconds; got != 6*3600 {
		t.Errorf("pod activeDeadlineSeconds = %d, want %d", got, 6*3600)
	}
	// Three attempts of 6h, and Kubernetes' 10s and 20s delays between them.
	if got, want := *train.Spec.ActiveDeadlineSeconds, int64(3*6*3600+10+20); got != want {
		t.Errorf("job activeDeadlineSeconds = %d, want %d", got, want)
	}
	if got := train.Annotations[plan.AnnotationAfter]; got != "prepare" {
		t.Errorf("after annotation = %q, want prepare", got)
	}
	eval := js[2].Spec.Template.Spec.Containers[0]
	if got := eval.Resources.Limits["aws.amazon.com/neuron"]; got.String() != "1" {
		t.Errorf("evaluate neuron limit = %s, want 1", got.String())
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/neuron-train", "step", "evaluate"}, eval.Command); diff != "" {
		t.Errorf("evaluate command (-want +got):\n%s", diff)
	}
}

func TestNoRetryMeansNoRetry(t *testing.T) {
	js := jobs(t, testflows.Compile(t, sdk.NewFlow("f").Step("a", sdk.Image("busybox"), sdk.Command("true"), sdk.Timeout(time.Hour))))
	// Kubernetes would retry 6 times when backoffLimit is left out.
	if js[0].Spec.BackoffLimit == nil || *js[0].Spec.BackoffLimit != 0 {
		t.Errorf("backoffLimit = %v, want 0", js[0].Spec.BackoffLimit)
	}
	if got := *js[0].Spec.ActiveDeadlineSeconds; got != 3600 {
		t.Errorf("activeDeadlineSeconds = %d, want 3600", got)
	}
	if _, ok := js[0].Annotations[plan.AnnotationAfter]; ok {
		t.Errorf("a step that waits for nothing has an after annotation")
	}
}

func TestForeachJobPerItem(t *testing.T) {
	p := testflows.Compile(t, sdk.NewFlow("fan", sdk.Image("busybox")).
		Step("split", sdk.Command("true")).
		Step("work", sdk.Command("true"), sdk.After("split"), sdk.Foreach("a", "b", "c")).
		Step("join", sdk.Command("true"), sdk.After("work")))
	js := jobs(t, p)
	if len(js) != 5 {
		t.Fatalf("got %d jobs, want 5", len(js))
	}
	for i, item := range []string{"a", "b", "c"} {
		j := js[1+i]
		if want := "fan-work-" + string(rune('0'+i)); j.Name != want {
			t.Errorf("job %d name = %q, want %q", i, j.Name, want)
		}
		env := map[string]string{}
		for _, e := range j.Spec.Template.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env[plan.EnvItem] != item || env[plan.EnvIndex] != string(rune('0'+i)) {
			t.Errorf("job %d env = %v, want item %q index %d", i, env, item, i)
		}
		if j.Labels[plan.LabelIndex] != string(rune('0'+i)) || j.Labels[plan.LabelStep] != "work" {
			t.Errorf("job %d labels = %v", i, j.Labels)
		}
		if _, ok := j.Spec.Template.Labels[plan.LabelIndex]; ok {
			t.Errorf("the index label reached the pod, which every target shares")
		}
	}
	if got := js[4].Annotations[plan.AnnotationAfter]; got != "work" {
		t.Errorf("join waits for %q, want work", got)
	}
}

func TestScheduleOneStepIsCronJob(t *testing.T) {
	long := strings.Repeat("x", 40)
	p := testflows.Compile(t, sdk.NewFlow(long, sdk.Schedule("0 3 * * *")).Step(long, sdk.Image("busybox"), sdk.Command("true")))
	objs, errs := job.Objects(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	cj, ok := objs[0].(*batchv1.CronJob)
	if !ok || len(objs) != 1 {
		t.Fatalf("got %T ×%d, want one CronJob", objs[0], len(objs))
	}
	if cj.Spec.Schedule != "0 3 * * *" || len(cj.Name) > 52 {
		t.Errorf("CronJob schedule %q, name %q (%d characters, at most 52)", cj.Spec.Schedule, cj.Name, len(cj.Name))
	}
	if cj.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy = %q", cj.Spec.ConcurrencyPolicy)
	}
	if got := cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Command; !cmp.Equal(got, []string{"true"}) {
		t.Errorf("CronJob's pod command = %q", got)
	}
	files, errs := emit.Files(job.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if header, _, _ := strings.Cut(string(files[0].Data), "\n"); !strings.HasPrefix(header, "# CronJob of flow ") || !strings.Contains(header, "0 3 * * *") {
		t.Errorf("a CronJob's file begins %q, which does not say it holds a CronJob and its schedule", header)
	}
}

func TestScheduleManyStepsIsAnError(t *testing.T) {
	p := testflows.Compile(t, sdk.NewFlow("f", sdk.Schedule("@daily"), sdk.Image("busybox")).
		Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("a")))
	_, errs := job.Objects(p)
	want := field.ErrorList{field.Forbidden(field.NewPath("schedule"), "")}
	if diff := cmp.Diff(want, errs, cmpIgnoreDetail); diff != "" {
		t.Fatalf("errors (-want +got):\n%s", diff)
	}
	if !strings.Contains(errs[0].Detail, "--target argo") {
		t.Errorf("the error does not say what to do: %s", errs[0].Detail)
	}
	if _, errs := emit.Files(job.Target{}, p); len(errs) == 0 {
		t.Errorf("Emit wrote files for a flow the target cannot express")
	}
}

func TestLongNamesStayValid(t *testing.T) {
	flow, step := strings.Repeat("f", 40), strings.Repeat("s", 40)
	p := testflows.Compile(t, sdk.NewFlow(flow, sdk.Image("busybox")).Step(step, sdk.Command("true"), sdk.Foreach("a", "b")))
	js := jobs(t, p)
	if js[0].Name == js[1].Name {
		t.Errorf("foreach jobs share the name %q", js[0].Name)
	}
	for _, j := range js {
		if len(j.Name) > 63 {
			t.Errorf("job name %q has %d characters", j.Name, len(j.Name))
		}
	}
}

func TestEmitIsDeterministicYAML(t *testing.T) {
	p := testflows.Compile(t, neuronFlow())
	a, errs := emit.Files(job.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for range 5 {
		b, _ := emit.Files(job.Target{}, testflows.Compile(t, neuronFlow()))
		if !cmp.Equal(a, b) {
			t.Fatalf("two emits differ:\n%s", cmp.Diff(string(a[0].Data), string(b[0].Data)))
		}
	}
	if a[0].Name != "neuron-train.job.yaml" {
		t.Errorf("file name %q", a[0].Name)
	}
	docs := strings.Split(string(a[0].Data), "\n---\n")
	if len(docs) != 4 { // the header, then three Jobs
		t.Fatalf("got %d documents, want header + 3", len(docs))
	}
	var j batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &j); err != nil {
		t.Fatal(err)
	}
	if j.Name != "neuron-train-train" {
		t.Errorf("second job is %q", j.Name)
	}
}

// TestHeaderSaysHowToRunInOrder checks that the file's header, which a reader
// sees before applying it, says how to run its Jobs in order: Kubernetes starts
// every Job it is given at once, so the header names run --kube and the kubectl
// wait of a Job's own completion condition.
func TestHeaderSaysHowToRunInOrder(t *testing.T) {
	files, errs := emit.Files(job.Target{}, testflows.Compile(t, neuronFlow()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	header, _, _ := strings.Cut(string(files[0].Data), "\n---\n")
	for _, want := range []string{"run --kube", "kubectl wait --for=condition=" + string(batchv1.JobComplete) + " job/"} {
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
