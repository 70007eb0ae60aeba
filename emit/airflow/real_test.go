package airflow_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

func TestMain(m *testing.M) {
	code := m.Run()
	exampletest.Cleanup()
	kubevalidate.Cleanup()
	os.Exit(code)
}

// airflowVersion is the Airflow of tools/airflow/constraints.txt.
const airflowVersion = "3.3.2"

// step is what Airflow must make of one step: taken from the Job target's output,
// so that Airflow is compared with the other target, not with itself.
type step struct {
	after     []string
	foreach   bool
	pods      []corev1.PodTemplateSpec // one per foreach item, or one
	namespace string
	retries   int
	timeout   *int64 // the pod's activeDeadlineSeconds
	nodes     int
}

// stepsOfJobs groups the Job target's Jobs by step.
func stepsOfJobs(t *testing.T, jobs []*batchv1.Job) map[string]*step {
	t.Helper()
	steps := map[string]*step{}
	for _, j := range jobs {
		name := j.Spec.Template.Labels[plan.LabelStep]
		s := steps[name]
		if s == nil {
			s = &step{namespace: j.Namespace, timeout: j.Spec.Template.Spec.ActiveDeadlineSeconds, nodes: 1}
			if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
				// A multi-node step: Retry is each node's retries on the Job target.
				s.nodes, s.retries = int(*j.Spec.Completions), int(*j.Spec.BackoffLimitPerIndex)
			} else {
				s.retries = int(*j.Spec.BackoffLimit)
			}
			if after := j.Annotations[plan.AnnotationAfter]; after != "" {
				s.after = strings.Split(after, ",")
			}
			steps[name] = s
		}
		if idx, ok := j.Labels[plan.LabelIndex]; ok {
			s.foreach = true
			if want := strconv.Itoa(len(s.pods)); idx != want {
				t.Fatalf("step %s: Job of index %s where %s was next", name, idx, want)
			}
		}
		s.pods = append(s.pods, j.Spec.Template)
	}
	return steps
}

// podName is what airflow.PodName gives for the step.
func podName(flow, step string) string {
	f := &plan.Flow{Name: flow, Steps: []plan.Step{{Name: step}}}
	return airflow.PodName(f, &f.Steps[0])
}

// checkDAG compares the DAG Airflow loaded with the Job target's steps: task ids,
// dependencies, and for every task and map index the pod the operator built.
func checkDAG(t *testing.T, d airflowtest.DAG, flow string, steps map[string]*step) {
	t.Helper()
	if d.SerializationError != nil {
		t.Errorf("Airflow cannot serialize the DAG as its DAG processor would:\n%s", *d.SerializationError)
	}
	// A multi-node step is its Job task between the tasks that create and delete
	// its Service.
	tasks := map[string]*wantTask{}
	for name, s := range steps {
		if s.nodes == 1 {
			tasks[name] = &wantTask{operator: "KubernetesPodOperator", upstream: s.after, step: s}
			continue
		}
		create, remove := name+airflow.ServiceTaskSuffix, name+airflow.ServiceDeleteTaskSuffix
		tasks[create] = &wantTask{operator: "KubernetesCreateResourceOperator", upstream: s.after, setup: true, serviceOf: name}
		tasks[name] = &wantTask{operator: "KubernetesJobOperator", upstream: []string{create}, step: s}
		tasks[remove] = &wantTask{operator: "KubernetesDeleteResourceOperator", upstream: []string{create, name}, teardown: true, serviceOf: name}
	}
	var wantIDs, gotIDs []string
	for name := range tasks {
		wantIDs = append(wantIDs, name)
	}
	for id := range d.Tasks {
		gotIDs = append(gotIDs, id)
	}
	slices.Sort(wantIDs)
	slices.Sort(gotIDs)
	if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
		t.Fatalf("task ids (-want +got):\n%s", diff)
	}
	downstream := map[string][]string{}
	for name, w := range tasks {
		for _, up := range w.upstream {
			downstream[up] = append(downstream[up], name)
		}
	}
	for name, w := range tasks {
		task := d.Tasks[name]
		mapped := w.step != nil && w.step.foreach
		if task.Operator != w.operator || task.Mapped != mapped || task.Setup != w.setup || task.Teardown != w.teardown {
			t.Errorf("task %s: %s, mapped %v, setup %v, teardown %v; want %s, mapped %v, setup %v, teardown %v",
				name, task.Operator, task.Mapped, task.Setup, task.Teardown, w.operator, mapped, w.setup, w.teardown)
		}
		if diff := cmp.Diff(slices.Sorted(slices.Values(w.upstream)), task.Upstream, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("task %s upstream (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(slices.Sorted(slices.Values(downstream[name])), task.Downstream, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("task %s downstream (-want +got):\n%s", name, diff)
		}
		if w.step == nil {
			if len(task.Instances) != 1 || task.Instances[0].Error != "" {
				t.Errorf("task %s: Airflow could not render it: %+v", name, task.Instances)
			}
			continue
		}
		s := w.step
		if s.foreach && task.ScheduledMapCount != len(s.pods) {
			t.Errorf("task %s: the scheduler maps it to %d instances, want %d", name, task.ScheduledMapCount, len(s.pods))
		}
		if len(task.Instances) != len(s.pods) {
			t.Errorf("task %s has %d instances, want %d", name, len(task.Instances), len(s.pods))
			continue
		}
		var services []*corev1.Service
		var servicesNamespace string
		if s.nodes > 1 {
			services, servicesNamespace = renderedServices(t, d.Tasks[name+airflow.ServiceTaskSuffix], d.Tasks[name+airflow.ServiceDeleteTaskSuffix], len(s.pods))
		}
		for i, in := range task.Instances {
			what := fmt.Sprintf("task %s instance %d", name, i)
			if in.Error != "" {
				t.Errorf("%s: Airflow could not render it or build its pod:\n%s", what, in.Error)
				continue
			}
			if s.nodes > 1 {
				if services != nil {
					checkJob(t, what, s, i, in, services[i], servicesNamespace)
				}
			} else {
				comparePods(t, what, s.pods[i], in.Pod, podName(flow, name), s.namespace)
			}
			if in.Retries != s.retries {
				t.Errorf("%s: retries = %d, want %d", what, in.Retries, s.retries)
			}
			// execution_timeout is the step's timeout; the pod's activeDeadlineSeconds
			// is the same, rounded up to whole seconds.
			var timeout *int64
			if in.ExecutionTimeout != nil {
				timeout = new(int64(math.Ceil(*in.ExecutionTimeout)))
			}
			if diff := cmp.Diff(s.timeout, timeout); diff != "" {
				t.Errorf("%s: execution_timeout, rounded up, against the pod's activeDeadlineSeconds (-want +got):\n%s", what, diff)
			}
			if in.OnFinishAction != airflow.OnFinishAction {
				t.Errorf("%s: on_finish_action = %q", what, in.OnFinishAction)
			}
		}
	}
}

// wantTask is what one Airflow task must be.
type wantTask struct {
	operator        string
	upstream        []string
	setup, teardown bool
	step            *step  // the step whose pods it runs
	serviceOf       string // the step whose Service it creates or deletes
}

// comparePods compares the pod Airflow built with the Job target's pod after
// removing the differences that are allowed, each checked first:
//   - the name: the operator names each pod after the task with a random suffix
//     (the Job's pods are named by Kubernetes);
//   - the namespace: the Job carries it on the Job; the operator puts it on the
//     pod, falling back to its connection's and then "default";
//   - the label airflow_version, by which the operator marks its pods (a run also
//     adds dag_id, task_id, run_id, try_number and map_index; these pods are
//     built outside a run);
//   - terminationMessagePolicy: File, which the operator sets and the API server
//     defaults every container to;
//   - an empty affinity and pod security context, which the operator passes when
//     there is none, and which constrain nothing;
//   - empty lists and maps against absent ones, alike on the wire.
func comparePods(t *testing.T, what string, want corev1.PodTemplateSpec, got *corev1.Pod, name, namespace string) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: no pod", what)
		return
	}
	got = got.DeepCopy()
	if !strings.HasPrefix(got.Name, name+"-") || len(got.Name) != len(name)+9 || len(got.Name) > emit.MaxNameLength {
		t.Errorf("%s: pod name %q does not start with %q", what, got.Name, name+"-")
	}
	if namespace == "" {
		namespace = "default"
	}
	if got.Namespace != namespace {
		t.Errorf("%s: namespace %q, want %q", what, got.Namespace, namespace)
	}
	gotTemplate := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: got.Labels, Annotations: got.Annotations},
		Spec:       got.Spec,
	}
	operatorPod(t, what, &gotTemplate)
	want = *want.DeepCopy()
	runIDs(t, what, &want, &gotTemplate)
	if diff := cmp.Diff(want, gotTemplate, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: Airflow's pod differs from the Job's (-job +airflow):\n%s", what, diff)
	}
}

// operatorPod removes from got, after checking them, the allowed differences
// between every pod the operator builds and the Job target's: the label
// airflow_version, terminationMessagePolicy, empty affinity and security context.
func operatorPod(t *testing.T, what string, got *corev1.PodTemplateSpec) {
	t.Helper()
	if v := got.Labels["airflow_version"]; v != airflowVersion {
		t.Errorf("%s: label airflow_version = %q, want %q", what, v, airflowVersion)
	}
	delete(got.Labels, "airflow_version")
	for i := range got.Spec.Containers {
		c := &got.Spec.Containers[i]
		if c.TerminationMessagePolicy != corev1.TerminationMessageReadFile {
			t.Errorf("%s: terminationMessagePolicy %q", what, c.TerminationMessagePolicy)
		}
		c.TerminationMessagePolicy = ""
	}
	if a := got.Spec.Affinity; a != nil && *a == (corev1.Affinity{}) {
		got.Spec.Affinity = nil
	}
	if sc := got.Spec.SecurityContext; sc != nil && cmp.Equal(*sc, corev1.PodSecurityContext{}, cmpopts.EquateEmpty()) {
		got.Spec.SecurityContext = nil
	}
}

// airflowRunID is the run in which dagcheck.py renders every task.
const airflowRunID = "manual__2026-12-02T14:20:32.669649+00:00"

// runIDs checks, then blanks, the one value in which a flow with an artifact
// store's pods differ between the Job target and Airflow: MANIFOLD_RUN_ID, the
// Job target's plan.DefaultRunID (no runtime names the run) and on Airflow the
// DAG run's id. Everything else of the store (its variables, the volume) must be
// equal. It also checks, then removes, Airflow's TRACEPARENT, empty in a run
// whose conf has no trace context, which the Job target's pods lack (the kube
// runtime sets it on each object it creates).
func runIDs(t *testing.T, what string, job, af *corev1.PodTemplateSpec) {
	t.Helper()
	for _, side := range []struct {
		pod  *corev1.PodTemplateSpec
		want int
	}{{job, 0}, {af, 1}} {
		c := &side.pod.Spec.Containers[0]
		n := 0
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
			if e.Name != plan.EnvTraceParent {
				return false
			}
			if n++; e.Value != "" || e.ValueFrom != nil {
				t.Errorf("%s: %s = %+v in a run without a trace context; want empty", what, e.Name, e)
			}
			return true
		})
		if n != side.want {
			t.Errorf("%s: %d %s variables, want %d", what, n, plan.EnvTraceParent, side.want)
		}
	}
	for _, side := range []struct {
		pod  *corev1.PodTemplateSpec
		want string
	}{{job, plan.DefaultRunID}, {af, airflowRunID}} {
		for i := range side.pod.Spec.Containers[0].Env {
			if e := &side.pod.Spec.Containers[0].Env[i]; e.Name == plan.EnvRunID {
				if e.Value != side.want {
					t.Errorf("%s: %s = %q, want %q", what, e.Name, e.Value, side.want)
				}
				e.Value = ""
			}
		}
	}
}

// decodeJobs reads the Jobs of a Job target YAML stream, passing over the Services
// of multi-node steps.
func decodeJobs(t *testing.T, data []byte) []*batchv1.Job {
	t.Helper()
	var jobs []*batchv1.Job
	for _, doc := range bytes.Split(data, []byte("\n---\n"))[1:] {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("job YAML: %v\n%s", err, doc)
		}
		if meta.Kind == "Service" || meta.Kind == "ResourceClaimTemplate" {
			continue
		}
		var j batchv1.Job
		if err := yaml.UnmarshalStrict(doc, &j); err != nil {
			t.Fatalf("job YAML: %v\n%s", err, doc)
		}
		jobs = append(jobs, &j)
	}
	return jobs
}

func compileFlow(t *testing.T, f *sdk.Flow) *plan.Flow {
	t.Helper()
	return compileWith(t, f, compile.Options{})
}

func compileWith(t *testing.T, f *sdk.Flow, o compile.Options) *plan.Flow {
	t.Helper()
	p, errs := compile.Compile(f, o)
	if len(errs) > 0 {
		t.Fatalf("compile %s: %v", f.Name(), errs.ToAggregate())
	}
	return p
}

// artifactsFlow passes artifacts between Run steps, foreach items, a multi-node
// step and a Command step: with an artifact store, every pod gets its variables
// (and volume).
func artifactsFlow(name string) *sdk.Flow {
	run := sdk.Run(func(*sdk.Context) error { return nil })
	return sdk.NewFlow(name, sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3")).
		Step("prepare", run).
		Step("shard", run, sdk.After("prepare"), sdk.Foreach("a", "b", "c"), sdk.Volume("data", "/data")).
		Step("train", sdk.After("shard"), sdk.Command("torchrun", "train.py", "--out", "$(MANIFOLD_ARTIFACTS)"),
			sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8)).
		Step("report", sdk.After("train"), sdk.Command("sh", "-c", "ls $MANIFOLD_RUN_DIR"), sdk.Env("OUT", "$(MANIFOLD_ARTIFACTS)/x"))
}

func writeAirflow(t *testing.T, p *plan.Flow, dir string) {
	t.Helper()
	files, errs := emit.Files(airflow.Target{}, p)
	if len(errs) > 0 {
		t.Fatalf("emit %s: %v", p.Name, errs.ToAggregate())
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func planJobs(t *testing.T, p *plan.Flow) []*batchv1.Job {
	t.Helper()
	var jobs []*batchv1.Job
	for i := range p.Steps {
		jobs = append(jobs, job.Jobs(p, &p.Steps[i])...)
	}
	return jobs
}

// everyOption uses every option that reaches the pod.
func everyOption() *sdk.Flow {
	return sdk.NewFlow("every", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Param("learning-rate", "0.1"), sdk.Param("items", "x"),
		sdk.Namespace("ml"), sdk.ServiceAccount("trainer"), sdk.ImagePullSecret("ecr"), sdk.ImagePullSecret("ngc"),
		sdk.Toleration("dedicated", "ml", "NoSchedule")).
		Step("train", sdk.Command("torchrun", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.CPU("100"), sdk.Memory("400Gi"),
			sdk.Disk("500Gi"), sdk.SharedMemory("64Gi"), sdk.Resource("example.com/license", 1),
			sdk.NodeSelector("karpenter.sh/capacity-type", "on-demand"),
			sdk.Env("A", "1"), sdk.SecretEnv("TOKEN", "hf", "token"), sdk.Secret("wandb"), sdk.Secret("s3"),
			sdk.Label("team", "ml"), sdk.Annotation("example.com/owner", "ml@example.com"),
			sdk.Annotation("example.com/template", "{{ ds }}"),
			sdk.Volume("data", "/data"), sdk.Volume("ckpt", "/checkpoints/{{ run }}"), sdk.Port(29500),
			sdk.RunAsUser(1000), sdk.RunAsNonRoot(true), sdk.ImagePullPolicy("IfNotPresent"),
			sdk.Retry(3), sdk.RetryBackoff(time.Minute), sdk.Timeout(90*time.Minute+500*time.Millisecond)).
		Step("serve", sdk.After("train"), sdk.Command("serve"), sdk.InstanceType("inf2.48xlarge"),
			sdk.Resource("aws.amazon.com/neuroncore", 24), sdk.Namespace("serving")).
		Step("gpu", sdk.After("train"), sdk.Command("nvidia-smi"), sdk.InstanceType("p5.48xlarge"),
			sdk.GPU(8), sdk.EFAAll(), sdk.RunAsNonRoot(false)).
		Step("amd", sdk.After("train"), sdk.Command("rocm-smi"), sdk.GPU(1), sdk.GPUVendor("amd"),
			sdk.Foreach("a")).
		Step("join", sdk.After("gpu", "amd", "serve"), sdk.Run(func(*sdk.Context) error { return nil }),
			sdk.Foreach("x", "y", "z"), sdk.Retry(1)).
		Step("dra", sdk.After("train"), sdk.Command("neuron-ls"), sdk.InstanceType("trn2.48xlarge"),
			sdk.Trainium(4), sdk.EFA(4), sdk.DRA(), sdk.Claim("shared-fpga"), sdk.Foreach("a", "b"))
}

// adversarial holds text that could break a Python literal, a Jinja template or
// a naive escaper: quotes, backslashes, every kind of line break, triple quotes,
// template and comment syntax (including this target's own param form),
// non-ASCII, control and invisible characters.
var adversarial = []string{
	`plain`, `"double" and 'single'`, `"""`, `'''`, `\`, `back\slash\n`, `ends with backslash\`,
	"line one\nline two\n", "crlf\r\nline", "cr\ronly", "\n", "tab\there", "",
	" leading and trailing ", `{{ params.x }}`, `{{ params['p0'] }}`, `{{workflow.parameters.x}}`,
	"{% raw %}x{% endraw %}", "{% if true %}yes{% endif %}", "{# comment #}", "{{", "}}", "{", "{%",
	"{{ '{{' }}", "$(MANIFOLD_PARAM_P0)", "# not a comment", `"); import os; os.system("true"); ("`,
	"ünïcödé ✓", "emoji 🚀", "nul\x00byte", "del\x7f", "nbsp\u00a0", "line\u2028separator",
	"next\u0085line", "tag\U000e0001", "bidi\u202ereversed",
}

// adversarialFlow puts every string of values in params, commands, env values,
// annotations and foreach items.
func adversarialFlow(name string, values []string) *sdk.Flow {
	opts := []sdk.FlowOption{sdk.Image("busybox")}
	for i, s := range values {
		opts = append(opts, sdk.Param(fmt.Sprintf("p%d", i), s))
	}
	f := sdk.NewFlow(name, opts...)
	for i, s := range values {
		f.Step(fmt.Sprintf("s%d", i), sdk.Command("sh", "-c", s, s), sdk.Env("VALUE", s), sdk.Env("SECOND", s+s),
			sdk.Annotation("example.com/note", s), sdk.Foreach(s, s+"2"))
	}
	return f
}

// twin gives a benign string that the target writes with the same structure as
// s: empty stays empty, and text that needs airflow.sdk.literal gets a '{'.
func twin(s string) string {
	switch {
	case s == "":
		return ""
	case strings.ContainsAny(s, "{\r\n"):
		return "x{"
	}
	return "x"
}

// TestRealAirflow loads every example's DAG, a flow with every option, a
// scheduled flow and adversarial flows into Airflow's DagBag, and compares every
// task's pod, as the operator builds it, with the Job target's pod.
func TestRealAirflow(t *testing.T) {
	dir := t.TempDir()
	bins := exampletest.Build(t)
	exampleJobs := map[string][]*batchv1.Job{}
	for _, name := range exampletest.Names() {
		jobDir := t.TempDir()
		for target, out := range map[string]string{"airflow": dir, "job": jobDir} {
			cmd := exec.Command(bins[name], "compile", "--target", target, "-o", out)
			cmd.Dir = t.TempDir()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s compile --target %s: %v\n%s", name, target, err, out)
			}
		}
		data, err := os.ReadFile(filepath.Join(jobDir, name+".job.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		exampleJobs[name] = decodeJobs(t, data)
	}
	flows := map[string]*plan.Flow{}
	long := strings.Repeat("x", compile.MaxNameLength)
	longest := sdk.NewFlow(long, sdk.Image("busybox")).
		Step(long, sdk.Command("true"), sdk.Foreach("a", "b")).
		Step(strings.Repeat("y", compile.MaxNameLength), sdk.Command("true"), sdk.After(long))
	for _, f := range []*sdk.Flow{everyOption(), adversarialFlow("adversarial", adversarial), longest, multiNodeFlow(), longestMultiNode()} {
		p := compileFlow(t, f)
		flows[p.Name] = p
		writeAirflow(t, p, dir)
	}
	for name, store := range map[string]compile.Options{
		"artifacts-s3":     {Artifacts: "s3://ml-artifacts/flows", ArtifactsEndpoint: "http://minio.storage:9000"},
		"artifacts-volume": {Artifacts: "pvc://shared-artifacts"},
	} {
		p := compileWith(t, artifactsFlow(name), store)
		flows[p.Name] = p
		writeAirflow(t, p, dir)
	}
	twins := make([]string, len(adversarial))
	for i, s := range adversarial {
		twins[i] = twin(s)
	}
	writeAirflow(t, compileFlow(t, adversarialFlow("twin", twins)), dir)
	scheduled := compileFlow(t, sdk.NewFlow("nightly", sdk.Image("busybox"), sdk.Schedule("0 3 * * *")).
		Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("a")))
	writeAirflow(t, scheduled, dir)

	r := airflowtest.Check(t, dir)
	if len(r.SyntaxErrors) > 0 || len(r.ImportErrors) > 0 {
		t.Fatalf("Airflow cannot load the DAGs:\nsyntax errors: %v\nimport errors: %v", r.SyntaxErrors, r.ImportErrors)
	}
	wantDAGs := len(exampleJobs) + len(flows) + 2
	if len(r.DAGs) != wantDAGs {
		t.Fatalf("the DagBag holds %d DAGs, want %d", len(r.DAGs), wantDAGs)
	}

	for name, jobs := range exampleJobs {
		t.Run("example/"+name, func(t *testing.T) {
			d, ok := r.DAGs[name]
			if !ok {
				t.Fatalf("no DAG %s", name)
			}
			checkDAG(t, d, name, stepsOfJobs(t, jobs))
			checkPodsFromJSON(t, r, name, d)
		})
	}
	for name, p := range flows {
		t.Run("flow/"+name, func(t *testing.T) {
			d := r.DAGs[name]
			checkDAG(t, d, name, stepsOfJobs(t, planJobs(t, p)))
			params := map[string]string{}
			for _, prm := range p.Params {
				params[prm.Name] = prm.Value
			}
			if diff := cmp.Diff(params, d.Params, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("DAG params (-want +got):\n%s", diff)
			}
			if d.Schedule != nil || d.Catchup || d.StartDate != airflow.StartDate.Format("2006-01-02T15:04:05-07:00") {
				t.Errorf("schedule %v, catchup %v, start_date %s", d.Schedule, d.Catchup, d.StartDate)
			}
			checkPodsFromJSON(t, r, name, d)
		})
	}
	t.Run("kubevalidate", func(t *testing.T) { validateBuilt(t, t.TempDir()) })
	t.Run("retries", func(t *testing.T) {
		every := r.DAGs["every"]
		train := every.Tasks["train"].Instances[0]
		if train.RetryDelay == nil || *train.RetryDelay != 60 || train.RetryExponentialBackoff != 0 || train.MaxRetryDelay != nil {
			t.Errorf("train (RetryBackoff 1m): retry_delay %v, backoff %v, max %v; want a fixed 60s", deref(train.RetryDelay), train.RetryExponentialBackoff, deref(train.MaxRetryDelay))
		}
		if got := deref(train.ExecutionTimeout); got != 5400.5 {
			t.Errorf("train execution_timeout = %v, want 5400.5", got)
		}
		for _, in := range every.Tasks["join"].Instances {
			if deref(in.RetryDelay) != 10 || in.RetryExponentialBackoff != 2 || deref(in.MaxRetryDelay) != 360 {
				t.Errorf("join (no RetryBackoff): retry_delay %v, backoff %v, max %v; want Kubernetes' 10s doubling to 6m", deref(in.RetryDelay), in.RetryExponentialBackoff, deref(in.MaxRetryDelay))
			}
		}
	})
	t.Run("schedule", func(t *testing.T) {
		d := r.DAGs["nightly"]
		if d.Schedule == nil || *d.Schedule != "0 3 * * *" || d.Catchup {
			t.Errorf("schedule %v, catchup %v; want 0 3 * * *, false", d.Schedule, d.Catchup)
		}
		if d.SerializationError != nil {
			t.Errorf("serialization: %s", *d.SerializationError)
		}
		if got := d.Tasks["b"].Upstream; !cmp.Equal(got, []string{"a"}) {
			t.Errorf("b upstream %v", got)
		}
	})
	t.Run("adversarial-structure", func(t *testing.T) {
		// The DAG with adversarial values parses to the same syntax tree, constants
		// aside, as the DAG of benign ones: no value changed the program.
		got, want := r.Shapes["adversarial.py"], r.Shapes["twin.py"]
		if got == "" || want == "" {
			t.Fatalf("no shapes: %v", r.Shapes)
		}
		if got != want {
			t.Errorf("adversarial values changed the DAG's structure:\n%s", cmp.Diff(want, got))
		}
	})
}

// checkPodsFromJSON compares the pods KubernetesPodOperator built from the
// .kpo.json arguments with those it built from the DAG: the same data, written
// twice.
func checkPodsFromJSON(t *testing.T, r *airflowtest.Report, name string, d airflowtest.DAG) {
	t.Helper()
	tasks, ok := r.KPOJSON[name+".kpo.json"]
	if !ok {
		t.Fatalf("no report for %s.kpo.json", name)
	}
	if e, ok := tasks["error"]; ok {
		t.Fatalf("%s.kpo.json: %s", name, e)
	}
	for id, task := range d.Tasks {
		switch task.Operator {
		case "KubernetesCreateResourceOperator", "KubernetesDeleteResourceOperator":
			var services []airflowtest.Instance
			if err := json.Unmarshal(tasks[id], &services); err != nil {
				t.Fatalf("%s.kpo.json task %s: %v", name, id, err)
			}
			if len(services) != 1 || services[0].YAMLConf != task.Instances[0].YAMLConf || services[0].Namespace != task.Instances[0].Namespace {
				t.Errorf("%s.kpo.json task %s: the Services from the JSON differ from the DAG's:\n%+v\n%+v", name, id, services, task.Instances)
			}
			continue
		case "KubernetesJobOperator":
			var jobs []*batchv1.Job
			if err := json.Unmarshal(tasks[id], &jobs); err != nil {
				t.Fatalf("%s.kpo.json task %s: %v", name, id, err)
			}
			if len(jobs) != len(task.Instances) {
				t.Fatalf("%s.kpo.json task %s: %d Jobs, want %d", name, id, len(jobs), len(task.Instances))
			}
			for i, in := range task.Instances {
				if diff := cmp.Diff(in.Job, jobs[i], cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("%s.kpo.json task %s instance %d: the Job from the JSON differs from the DAG's (-dag +json):\n%s", name, id, i, diff)
				}
			}
			continue
		}
		var pods []*corev1.Pod
		if err := json.Unmarshal(tasks[id], &pods); err != nil {
			t.Fatalf("%s.kpo.json task %s: %v", name, id, err)
		}
		if len(pods) != len(task.Instances) {
			t.Fatalf("%s.kpo.json task %s: %d pods, want %d", name, id, len(pods), len(task.Instances))
		}
		for i, in := range task.Instances {
			// The names differ by the operator's random suffix and the task id.
			a, b := pods[i].DeepCopy(), in.Pod.DeepCopy()
			a.Name, b.Name = "", ""
			if diff := cmp.Diff(b, a, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s.kpo.json task %s instance %d: the pod from the JSON differs from the DAG's (-dag +json):\n%s", name, id, i, diff)
			}
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
