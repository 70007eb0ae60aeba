package argo_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// runUID stands for the uid Argo gives a workflow run.
const runUID = "0f3c9a7e-5b1d-4e2a-9c8f-7a6b5c4d3e2f"

var modes = []string{plan.ArgoJobSet, plan.ArgoJob}

// compileMode compiles f with manifold.toml's argo_multi_node = mode.
func compileMode(t testing.TB, f *sdk.Flow, mode string) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{Config: compile.Config{ArgoMultiNode: mode}})
	if len(errs) > 0 {
		t.Fatalf("compile: %v", errs.ToAggregate())
	}
	return p
}

func trainNodes(extra ...sdk.StepOption) *sdk.Flow {
	return sdk.NewFlow("neuron-train", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule")).
		Step("prepare", sdk.Command("true"), sdk.InstanceType("trn1.32xlarge")).
		Step("check", sdk.Command("true"), sdk.InstanceType("trn1.32xlarge"), sdk.After("prepare")).
		Step("train", append([]sdk.StepOption{sdk.Image("example.com/neuron:v1"), sdk.Command("torchrun", "train.py"),
			sdk.After("check"), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.Nodes(2),
			sdk.Retry(2), sdk.Timeout(6 * time.Hour)}, extra...)...).
		Step("evaluate", sdk.Command("true"), sdk.After("train"), sdk.InstanceType("trn1.32xlarge"))
}

// multiNodeFlows hold multi-node steps with params, foreach, the longest names,
// every pod option and adversarial strings.
func multiNodeFlows() map[string]*sdk.Flow {
	long := strings.Repeat("x", compile.MaxNameLength)
	flows := map[string]*sdk.Flow{
		"neuron": trainNodes(),
		"foreach": sdk.NewFlow("fan", sdk.Image("busybox"), sdk.Param("p", "false"), sdk.Param("lr-rate", "0.1")).
			Step("split", sdk.Command("true")).
			Step("work", sdk.Command("true"), sdk.After("split"), sdk.Foreach("a", "yes", "0123"), sdk.Nodes(3), sdk.Port(1234)).
			Step("join", sdk.Command("true"), sdk.After("work")),
		"longest-names": sdk.NewFlow(long, sdk.Image("busybox"), sdk.Param("p", "v")).
			Step(long, sdk.Command("true"), sdk.Nodes(128), sdk.Foreach("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"),
				sdk.Timeout(time.Hour), sdk.Retry(1)).
			Step(strings.Repeat("y", compile.MaxNameLength), sdk.Command("true"), sdk.After(long), sdk.Nodes(2)),
		"every-option": sdk.NewFlow("every", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"), sdk.Namespace("ml"),
			sdk.ServiceAccount("trainer"), sdk.ImagePullSecret("ecr"), sdk.Label("team", "ml"), sdk.RunAsNonRoot(true)).
			Step("prepare", sdk.Command("true")).
			Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py"), sdk.InstanceType("p5.48xlarge"),
				sdk.GPU(8), sdk.EFAAll(), sdk.Nodes(4), sdk.SharedMemory("64Gi"),
				sdk.Env("A", "1"), sdk.SecretEnv("TOKEN", "hf", "token"), sdk.Secret("wandb"), sdk.Volume("data", "/data"),
				sdk.Annotation("example.com/note", "big"), sdk.RunAsUser(1000), sdk.Retry(3), sdk.Timeout(90*time.Minute)).
			Step("publish", sdk.After("train"), sdk.Command("true")),
		// Every scheduled run is a workflow of its own uid, so its objects' names.
		"cron": sdk.NewFlow("nightly", sdk.Image("busybox"), sdk.Schedule("@daily"), sdk.Namespace("ml")).
			Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("a"), sdk.Nodes(2)),
		// Only multi-node steps: nothing is hoisted.
		"only-nodes": sdk.NewFlow("only", sdk.Image("busybox")).Step("a", sdk.Command("true"), sdk.Nodes(2)),
		"digit-step": sdk.NewFlow("digits", sdk.Image("busybox")).
			Step("1st", sdk.Command("true"), sdk.Nodes(2)).Step("2nd", sdk.Command("true"), sdk.After("1st"), sdk.Nodes(2)),
	}
	// "{{" in a param's default, an item, a variable and an argument.
	flows["braces"] = sdk.NewFlow("braces", sdk.Image("busybox"), sdk.Param("p", "{{workflow.name}} $(X)")).
		Step("a", sdk.Command("echo", "{{ x }}", "$$(X)${{"), sdk.Env("V", "$(MANIFOLD_PARAM_P){{item}}"),
			sdk.Foreach("{{inputs.parameters.item}}", "b"), sdk.Nodes(2))
	for i, s := range adversarial {
		flows[fmt.Sprintf("adversarial-%d", i)] = sdk.NewFlow("adv", sdk.Image("busybox"), sdk.Param("p", s)).
			Step("a", sdk.Command("sh", "-c", s, s), sdk.Env("VALUE", s), sdk.Annotation("example.com/note", s),
				sdk.Foreach(s, s+"2"), sdk.Nodes(2)).
			Step("b", sdk.After("a"), sdk.Command("echo", s), sdk.Nodes(3))
	}
	return flows
}

func tasksOf(wt *wfv1.WorkflowTemplate) map[string]wfv1.DAGTask {
	tasks := map[string]wfv1.DAGTask{}
	for _, tmpl := range wt.Spec.Templates {
		if tmpl.DAG != nil {
			for _, tk := range tmpl.DAG.Tasks {
				tasks[tk.Name] = tk
			}
		}
	}
	return tasks
}

func TestMultiNodeJobSetTemplate(t *testing.T) {
	p := compileMode(t, trainNodes(), plan.ArgoJobSet)
	wt, errs := argo.WorkflowTemplate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	train := templateNamed(t, wt, "train")
	if train.Container != nil || train.Resource == nil {
		t.Fatalf("train is not a resource template: %+v", train)
	}
	r := train.Resource
	if r.Action != "create" || !r.SetOwnerReference {
		t.Errorf("action %q, setOwnerReference %v", r.Action, r.SetOwnerReference)
	}
	if r.SuccessCondition != "status.terminalState == Completed" || r.FailureCondition != "status.terminalState == Failed" {
		t.Errorf("conditions %q / %q", r.SuccessCondition, r.FailureCondition)
	}
	if train.RetryStrategy != nil || train.ActiveDeadlineSeconds != nil {
		t.Errorf("a resource template is retried or bounded by Argo: %+v %v", train.RetryStrategy, train.ActiveDeadlineSeconds)
	}
	tasks := tasksOf(wt)
	if tk := tasks["train"]; tk.Template != "train" || tk.Depends != "check" {
		t.Errorf("train task %+v", tk)
	}
	if tk := tasks["evaluate"]; tk.Depends != "train" {
		t.Errorf("evaluate depends on %q", tk.Depends)
	}

	m, err := argopod.Manifest(wt, "train", 0, runUID)
	if err != nil {
		t.Fatal(err)
	}
	var js jobsetv1.JobSet
	if err := yaml.UnmarshalStrict([]byte(m), &js); err != nil {
		t.Fatalf("%v\n%s", err, m)
	}
	// After Argo's substitution, the manifest is the jobset target's JobSet for
	// this run's name: same pods, params at their values, MASTER_ADDR at the name.
	if want := "neuron-train-train-" + runUID[:8]; js.Name != want {
		t.Errorf("JobSet name %q, want %q", js.Name, want)
	}
	want := jobset.Build(p, p.Step("train"), js.Name, emit.PodOptions{})
	expandedJobSets(t, p, want, &js)
	if diff := cmp.Diff(want, &js, argopod.Untraced); diff != "" {
		t.Errorf("the manifest is not the jobset target's JobSet (-jobset +argo):\n%s", diff)
	}
	env := map[string]string{}
	for _, e := range js.Spec.ReplicatedJobs[0].Template.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if want := jobset.MasterAddr(js.Name, jobset.ReplicatedJob); env["MASTER_ADDR"] != want || env["MANIFOLD_PARAM_EPOCHS"] != "3" {
		t.Errorf("MASTER_ADDR %q (want %q), MANIFOLD_PARAM_EPOCHS %q", env["MASTER_ADDR"], want, env["MANIFOLD_PARAM_EPOCHS"])
	}
}

func TestMultiNodeJobTemplates(t *testing.T) {
	p := compileMode(t, trainNodes(), plan.ArgoJob)
	wt, errs := argo.WorkflowTemplate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	svc, train := templateNamed(t, wt, "train"+argo.ServiceSuffix), templateNamed(t, wt, "train")
	for _, tmpl := range []*wfv1.Template{svc, train} {
		if tmpl.Resource == nil || tmpl.Resource.Action != "create" || !tmpl.Resource.SetOwnerReference || tmpl.RetryStrategy != nil {
			t.Errorf("template %s: %+v", tmpl.Name, tmpl)
		}
	}
	if svc.Resource.SuccessCondition != "" || svc.Resource.FailureCondition != "" || svc.ActiveDeadlineSeconds != nil {
		t.Errorf("the Service's template waits: %+v", svc)
	}
	if train.Resource.SuccessCondition != argo.JobSuccess || train.Resource.FailureCondition != argo.JobFailure {
		t.Errorf("conditions %q / %q", train.Resource.SuccessCondition, train.Resource.FailureCondition)
	}
	// The Job's own deadline (every attempt and Kubernetes' retry delays), plus five
	// minutes for its pods to stop.
	j := job.Jobs(p, p.Step("train"))[0]
	if want := intstr.FromInt32(int32(*j.Spec.ActiveDeadlineSeconds + 300)); train.ActiveDeadlineSeconds == nil || *train.ActiveDeadlineSeconds != want {
		t.Errorf("activeDeadlineSeconds %v, want %v", train.ActiveDeadlineSeconds, want)
	}
	tasks := tasksOf(wt)
	var order []string
	for _, name := range []string{"train" + argo.ServiceSuffix, "train", "evaluate"} {
		order = append(order, name+"<"+tasks[name].Depends)
	}
	if diff := cmp.Diff([]string{"train-service-<check", "train<train-service-", "evaluate<train"}, order); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}

	sm, err := argopod.Manifest(wt, "train"+argo.ServiceSuffix, 0, runUID)
	if err != nil {
		t.Fatal(err)
	}
	jm, err := argopod.Manifest(wt, "train", 0, runUID)
	if err != nil {
		t.Fatal(err)
	}
	var gotSvc corev1.Service
	var gotJob batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(sm), &gotSvc); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(jm), &gotJob); err != nil {
		t.Fatal(err)
	}
	if want := "neuron-train-train-" + runUID[:8]; gotJob.Name != want {
		t.Errorf("Job name %q, want %q", gotJob.Name, want)
	}
	wantJob := job.New(p, p.Step("train"), gotJob.Name, emit.PodOptions{})
	expanded(t, p, &wantJob.Spec.Template.Spec, &gotJob.Spec.Template.Spec)
	if diff := cmp.Diff(wantJob, &gotJob, argopod.Untraced); diff != "" {
		t.Errorf("the manifest is not the job target's Job (-job +argo):\n%s", diff)
	}
	if diff := cmp.Diff(job.Service(wantJob), &gotSvc); diff != "" {
		t.Errorf("the manifest is not the job target's Service (-job +argo):\n%s", diff)
	}
}

// TestMultiNodeForeach: in JobSet mode a foreach step is one JobSet with a
// replicated job per item and no withItems; in Job mode its Service and Job tasks
// run withItems, each item's objects named with its index.
func TestMultiNodeForeach(t *testing.T) {
	f := multiNodeFlows()["foreach"]
	p := compileMode(t, f, plan.ArgoJobSet)
	wt, errs := argo.WorkflowTemplate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if tk := tasksOf(wt)["work"]; len(tk.WithItems) != 0 || len(tk.Arguments.Parameters) != 0 {
		t.Errorf("the JobSet's task runs withItems: %+v", tk)
	}
	m, err := argopod.Manifest(wt, "work", 0, runUID)
	if err != nil {
		t.Fatal(err)
	}
	var js jobsetv1.JobSet
	if err := yaml.UnmarshalStrict([]byte(m), &js); err != nil {
		t.Fatal(err)
	}
	want := jobset.Build(p, p.Step("work"), js.Name, emit.PodOptions{})
	expandedJobSets(t, p, want, &js)
	if diff := cmp.Diff(want, &js, argopod.Untraced); diff != "" {
		t.Errorf("the manifest is not the jobset target's JobSet (-jobset +argo):\n%s", diff)
	}
	if len(js.Spec.ReplicatedJobs) != 3 {
		t.Errorf("%d replicated jobs, want one per item", len(js.Spec.ReplicatedJobs))
	}

	p = compileMode(t, f, plan.ArgoJob)
	if wt, errs = argo.WorkflowTemplate(p); len(errs) > 0 {
		t.Fatal(errs)
	}
	tasks := tasksOf(wt)
	for _, name := range []string{"work" + argo.ServiceSuffix, "work"} {
		if n := len(tasks[name].WithItems); n != 3 {
			t.Errorf("task %s has %d items, want 3", name, n)
		}
	}
	s := p.Step("work")
	for i := range s.Foreach {
		jm, err := argopod.Manifest(wt, "work", i, runUID)
		if err != nil {
			t.Fatal(err)
		}
		var j batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(jm), &j); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("fan-work-%d-%s", i, runUID[:8]); j.Name != want {
			t.Errorf("item %d: Job %q, want %q", i, j.Name, want)
		}
		want := job.New(p, s, j.Name, emit.PodOptions{Item: emit.ItemAt(s, i)})
		expanded(t, p, &want.Spec.Template.Spec, &j.Spec.Template.Spec)
		if diff := cmp.Diff(want, &j, argopod.Untraced); diff != "" {
			t.Errorf("item %d: the manifest is not the job target's Job (-job +argo):\n%s", i, diff)
		}
	}
}

// TestExecutorGetsNoAcceleratorSelector: the executor pod of a resource template
// takes the workflow-level pod fields, so with a multi-node step the steps'
// common instance type stays in their own templates, while what cannot strand the
// executor is still shared; without one it is shared as before.
func TestExecutorGetsNoAcceleratorSelector(t *testing.T) {
	p := compileMode(t, trainNodes(), plan.ArgoJobSet)
	wt, errs := argo.WorkflowTemplate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(wt.Spec.NodeSelector) != 0 || len(wt.Spec.Tolerations) != 0 {
		t.Errorf("workflow nodeSelector %v, tolerations %v reach the executor pod", wt.Spec.NodeSelector, wt.Spec.Tolerations)
	}
	for _, step := range []string{"prepare", "check", "evaluate"} {
		if sel := templateNamed(t, wt, step).NodeSelector; sel[plan.LabelInstanceType] != "trn1.32xlarge" {
			t.Errorf("%s lost its instance type: %v", step, sel)
		}
		pod, err := argopod.Resolve(wt, step, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := job.Jobs(p, p.Step(step))[0].Spec.Template
		expanded(t, p, &want.Spec, &pod.Spec)
		if diff := cmp.Diff(want, pod, cmpopts.EquateEmpty(), argopod.Untraced); diff != "" {
			t.Errorf("%s: Argo's pod differs from the Job's (-job +argo):\n%s", step, diff)
		}
	}
	if wt.Spec.PodMetadata == nil || wt.Spec.PodMetadata.Labels[plan.LabelFlow] != "neuron-train" {
		t.Errorf("podMetadata is no longer shared: %+v", wt.Spec.PodMetadata)
	}

	single := compileMode(t, trainNodes(sdk.Nodes(1)), plan.ArgoJobSet)
	wt, errs = argo.WorkflowTemplate(single)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if wt.Spec.NodeSelector[plan.LabelInstanceType] != "trn1.32xlarge" {
		t.Errorf("without a resource template the common selector is not shared: %v", wt.Spec.NodeSelector)
	}
}

// TestMultiNodeShapesAcceptedByArgoLint: Argo's validator accepts every
// multi-node flow in both modes.
func TestMultiNodeShapesAcceptedByArgoLint(t *testing.T) {
	var paths []string
	for _, e := range emitMultiNode(t) {
		paths = append(paths, e.path)
	}
	if out, ok := argolint.Run(t, paths...); !ok {
		t.Errorf("Argo's validator refuses multi-node output:\n%s", out)
	}
}

// emitted is a multi-node flow compiled in one mode, emitted and written to path.
type emitted struct {
	name string
	p    *plan.Flow
	data []byte
	path string
}

// emitMultiNode emits every multi-node flow in both modes.
func emitMultiNode(t *testing.T) []emitted {
	t.Helper()
	dir := t.TempDir()
	var out []emitted
	for name, f := range multiNodeFlows() {
		for _, mode := range modes {
			p := compileMode(t, f, mode)
			files, errs := emit.Files(argo.Target{}, p)
			if len(errs) > 0 {
				t.Fatalf("%s: %v", name, errs.ToAggregate())
			}
			name := name + " " + mode
			out = append(out, emitted{name, p, files[0].Data, writeFile(t, dir, name, files[0].Data)})
		}
	}
	return out
}

// writeFile writes data to dir/name.yaml and returns that path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, strings.ReplaceAll(name, " ", ".")+".yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMultiNodeManifests: Argo's own substitution (tools/argolint -manifests)
// turns every resource template of every multi-node flow into a manifest that
//   - argopod's model of that substitution also gives, so the parity tests that
//     use the model stand on Argo's behaviour;
//   - names its objects within their limits, ending in the run's token;
//   - the API server's validation accepts (JobSets with their CRD schema and
//     webhooks; Jobs and Services);
//   - and is exactly the jobset (or job) target's object for that name: every
//     adversarial param and item reaches the pods as written.
func TestMultiNodeManifests(t *testing.T) {
	var all []string
	for _, e := range emitMultiNode(t) {
		out, ok := argolint.Manifests(t, runUID, e.path)
		if !ok {
			t.Fatalf("%s: argolint -manifests: %s", e.name, out)
		}
		docs := manifestDocs(out)
		wt := decodeTemplate(t, e.data)
		var fromModel []string
		for i := range e.p.Steps {
			s := &e.p.Steps[i]
			if s.Nodes < 2 {
				continue
			}
			items := 1
			if e.p.ArgoMultiNode == plan.ArgoJob && s.Foreach != nil {
				items = len(s.Foreach)
			}
			tasks := []string{argo.TaskName(s.Name)}
			if e.p.ArgoMultiNode == plan.ArgoJob {
				tasks = []string{argo.TaskName(s.Name) + argo.ServiceSuffix, argo.TaskName(s.Name)}
			}
			for _, tk := range tasks {
				for item := range items {
					m, err := argopod.Manifest(wt, tk, item, runUID)
					if err != nil {
						t.Fatal(err)
					}
					fromModel = append(fromModel, strings.TrimSpace(m)) // as manifestDocs trims Argo's
				}
			}
			if len(docs) < len(fromModel) {
				t.Fatalf("%s: argolint -manifests gave %d manifests, want at least %d", e.name, len(docs), len(fromModel))
			}
			checkObjects(t, e.name, e.p, s, docs[len(fromModel)-len(tasks)*items:len(fromModel)])
		}
		if diff := cmp.Diff(fromModel, docs); diff != "" {
			t.Errorf("%s: argopod's manifests differ from Argo's (-argopod +argo):\n%s", e.name, diff)
		}
		all = append(all, docs...)
	}
	path := writeFile(t, t.TempDir(), "manifests", []byte(strings.Join(all, "\n---\n")))
	if out, ok := kubevalidate.Run(t, path); !ok {
		t.Errorf("the API server's validation refuses the objects multi-node steps create:\n%s", out)
	}
}

// manifestDocs splits argolint -manifests output into its manifests.
func manifestDocs(out string) []string {
	var docs []string
	for _, doc := range strings.Split(out, "\n---\n") {
		var lines []string
		for _, line := range strings.Split(doc, "\n") {
			if !strings.HasPrefix(line, "# template ") {
				lines = append(lines, line)
			}
		}
		if d := strings.TrimSpace(strings.Join(lines, "\n")); d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// checkObjects checks the manifests Argo made for step s: names within limits and
// ending in the run's token, and each object the target's own for that name.
func checkObjects(t *testing.T, what string, p *plan.Flow, s *plan.Step, docs []string) {
	t.Helper()
	token := "-" + runUID[:8]
	named := func(name string, max int) {
		if !strings.HasSuffix(name, token) || len(name) > max || len(validation.IsDNS1123Label(name)) > 0 {
			t.Errorf("%s: step %s: name %q (at most %d, ending %q)", what, s.Name, name, max, token)
		}
	}
	if p.ArgoMultiNode == plan.ArgoJobSet {
		var js jobsetv1.JobSet
		if err := yaml.UnmarshalStrict([]byte(docs[0]), &js); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		named(js.Name, jobset.MaxName(s))
		want := jobset.Build(p, s, js.Name, emit.PodOptions{})
		for i := range want.Spec.ReplicatedJobs {
			if i < len(js.Spec.ReplicatedJobs) {
				expanded(t, p, &want.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec, &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec)
			}
		}
		if diff := cmp.Diff(want, &js, argopod.Untraced); diff != "" {
			t.Errorf("%s: step %s: not the jobset target's JobSet (-jobset +argo):\n%s", what, s.Name, diff)
		}
		return
	}
	n := len(docs) / 2
	for i := range n {
		var svc corev1.Service
		var j batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(docs[i]), &svc); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := yaml.UnmarshalStrict([]byte(docs[n+i]), &j); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		named(j.Name, job.MaxName(s))
		o := emit.PodOptions{}
		if s.Foreach != nil {
			o.Item = emit.ItemAt(s, i)
		}
		want := job.New(p, s, j.Name, o)
		expanded(t, p, &want.Spec.Template.Spec, &j.Spec.Template.Spec)
		if diff := cmp.Diff(want, &j, argopod.Untraced); diff != "" {
			t.Errorf("%s: step %s item %d: not the job target's Job (-job +argo):\n%s", what, s.Name, i, diff)
		}
		if diff := cmp.Diff(job.Service(want), &svc); diff != "" {
			t.Errorf("%s: step %s item %d: not the job target's Service (-job +argo):\n%s", what, s.Name, i, diff)
		}
	}
}

// expanded puts the containers of want, a target's pod, and got, the argo
// target's for it, as the kubelet fills them in (argopod.Expanded), when p
// holds "{{": the argo target writes such values otherwise, and the containers
// must get the same bytes.
func expanded(t *testing.T, p *plan.Flow, want, got *corev1.PodSpec) {
	t.Helper()
	cm := argo.Literals(p)
	if cm == nil {
		return
	}
	var err error
	for i := range want.Containers {
		if want.Containers[i], err = argopod.Expanded(want.Containers[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range got.Containers {
		if got.Containers[i], err = argopod.Expanded(got.Containers[i], cm); err != nil {
			t.Fatal(err)
		}
	}
}

// expandedJobSets is expanded for the pods of each replicated job of want, a
// jobset target's JobSet, and got, the argo target's for it.
func expandedJobSets(t *testing.T, p *plan.Flow, want, got *jobsetv1.JobSet) {
	t.Helper()
	for i := range min(len(want.Spec.ReplicatedJobs), len(got.Spec.ReplicatedJobs)) {
		expanded(t, p, &want.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec, &got.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec)
	}
}

// TestBrokenMultiNodeTemplateRefused: Argo's validator refuses a multi-node
// template whose manifest lost its closing brace, or has an action Argo lacks, so the
// lint test above can fail.
func TestBrokenMultiNodeTemplateRefused(t *testing.T) {
	dir := t.TempDir()
	for name, breakIt := range map[string]func(r *wfv1.ResourceTemplate){
		"unclosed": func(r *wfv1.ResourceTemplate) { r.Manifest = strings.TrimSuffix(r.Manifest, "}\n") },
		"action":   func(r *wfv1.ResourceTemplate) { r.Action = "launch" },
	} {
		t.Run(name, func(t *testing.T) {
			wt, errs := argo.WorkflowTemplate(compileMode(t, trainNodes(), plan.ArgoJobSet))
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			breakIt(templateNamed(t, wt, "train").Resource)
			data, err := encode.YAML("", wt)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := argolint.Run(t, writeFile(t, dir, name, data))
			if ok {
				t.Fatalf("a broken multi-node template passed:\n%s", out)
			}
			if !strings.Contains(out, "templates.train.resource") {
				t.Errorf("the problem is not the train template's resource:\n%s", out)
			}
		})
	}
}

// TestConditionsReadTheObjectsStatus: Argo's executor (its label selector parser
// and gjson, through argolint -conditions) reads the templates' conditions on
// JobSets and Jobs in each state as the step's outcome: a node that is retried
// does not fail the step, a Job suspended by a queue first still fails it.
func TestConditionsReadTheObjectsStatus(t *testing.T) {
	now := metav1.Now()
	cond := func(types ...batchv1.JobConditionType) []batchv1.JobCondition {
		var cs []batchv1.JobCondition
		for _, ty := range types {
			status := corev1.ConditionTrue
			if ty == batchv1.JobSuspended {
				status = corev1.ConditionFalse
			}
			cs = append(cs, batchv1.JobCondition{Type: ty, Status: status, LastTransitionTime: now})
		}
		return cs
	}
	jobs := []struct {
		name   string
		status batchv1.JobStatus
		want   string
	}{
		{"running", batchv1.JobStatus{Active: 2}, "waiting"},
		{"a node retried", batchv1.JobStatus{Active: 2, Failed: 1, FailedIndexes: new("")}, "waiting"},
		{"failing", batchv1.JobStatus{Failed: 1, FailedIndexes: new("1"), Conditions: cond(batchv1.JobFailureTarget)}, "failed"},
		{"failed", batchv1.JobStatus{Failed: 1, Conditions: cond(batchv1.JobFailureTarget, batchv1.JobFailed)}, "failed"},
		{"failed after a queue", batchv1.JobStatus{Failed: 1, Conditions: cond(batchv1.JobSuspended, batchv1.JobFailureTarget, batchv1.JobFailed)}, "failed"},
		{"deadline, older cluster", batchv1.JobStatus{Conditions: cond(batchv1.JobFailed)}, "failed"},
		{"succeeding", batchv1.JobStatus{Succeeded: 2, Conditions: cond(batchv1.JobSuccessCriteriaMet)}, "waiting"},
		{"complete", batchv1.JobStatus{Succeeded: 2, CompletionTime: &now, Conditions: cond(batchv1.JobSuccessCriteriaMet, batchv1.JobComplete)}, "succeeded"},
	}
	sets := []struct {
		name   string
		status jobsetv1.JobSetStatus
		want   string
	}{
		{"running", jobsetv1.JobSetStatus{Restarts: 1}, "waiting"},
		{"completed", jobsetv1.JobSetStatus{TerminalState: string(jobsetv1.JobSetCompleted)}, "succeeded"},
		{"failed", jobsetv1.JobSetStatus{Restarts: 2, TerminalState: string(jobsetv1.JobSetFailed)}, "failed"},
	}
	dir := t.TempDir()
	check := func(kind, success, failure string, objects []any, want []string) {
		var docs []string
		for _, o := range objects {
			data, err := json.Marshal(o) // with status, which encode.YAML drops
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, string(data))
		}
		out, ok := argolint.Conditions(t, success, failure, writeFile(t, dir, kind, []byte(strings.Join(docs, "\n---\n"))))
		if !ok {
			t.Fatalf("%s: %s", kind, out)
		}
		if diff := cmp.Diff(want, strings.Fields(out)); diff != "" {
			t.Errorf("%s outcomes (-want +got):\n%s", kind, diff)
		}
	}
	var objects []any
	var want []string
	for _, j := range jobs {
		objects = append(objects, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: j.name}, Status: j.status})
		want = append(want, j.want)
	}
	check("jobs", argo.JobSuccess, argo.JobFailure, objects, want)
	objects, want = nil, nil
	for _, s := range sets {
		objects = append(objects, &jobsetv1.JobSet{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Status: s.status})
		want = append(want, s.want)
	}
	check("jobsets", argo.JobSetSuccess, argo.JobSetFailure, objects, want)
}
