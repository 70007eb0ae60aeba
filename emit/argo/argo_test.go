package argo_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

var cmpIgnoreDetail = cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")

func templateNamed(t *testing.T, wt *wfv1.WorkflowTemplate, name string) *wfv1.Template {
	t.Helper()
	for i := range wt.Spec.Templates {
		if wt.Spec.Templates[i].Name == name {
			return &wt.Spec.Templates[i]
		}
	}
	t.Fatalf("no template %q", name)
	return nil
}

func TestTrainTemplate(t *testing.T) {
	wt := workflowTemplate(t, neuronFlow())
	if wt.Name != "neuron-train" || wt.Spec.Entrypoint != argo.Entrypoint {
		t.Errorf("name %q, entrypoint %q", wt.Name, wt.Spec.Entrypoint)
	}
	train := templateNamed(t, wt, "train")
	for _, l := range []corev1.ResourceList{train.Container.Resources.Requests, train.Container.Resources.Limits} {
		if diff := cmp.Diff(corev1.ResourceList{
			"aws.amazon.com/neuron": resource.MustParse("16"),
			"vpc.amazonaws.com/efa": resource.MustParse("8"),
		}, l); diff != "" {
			t.Errorf("train resources (-want +got):\n%s", diff)
		}
	}
	pod, err := argopod.Resolve(wt, "train", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantTol := []corev1.Toleration{
		{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"},
		{Key: "aws.amazon.com/neuron", Operator: "Exists", Effect: "NoSchedule"},
	}
	if diff := cmp.Diff(wantTol, pod.Spec.Tolerations); diff != "" {
		t.Errorf("train tolerations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&intstr.IntOrString{IntVal: 6 * 3600}, train.ActiveDeadlineSeconds); diff != "" {
		t.Errorf("activeDeadlineSeconds (-want +got):\n%s", diff)
	}
	want := &wfv1.RetryStrategy{
		Limit:       new(intstr.FromInt32(2)),
		RetryPolicy: wfv1.RetryPolicyAlways,
		Backoff:     &wfv1.Backoff{Duration: "10s", Factor: new(intstr.FromInt32(2)), Cap: "6m0s"},
	}
	if diff := cmp.Diff(want, train.RetryStrategy); diff != "" {
		t.Errorf("retryStrategy (-want +got):\n%s", diff)
	}
	if p := wt.Spec.Arguments.Parameters; len(p) != 2 || p[0].Name != "epochs" || p[0].Value.String() != "3" ||
		p[1].Name != argo.ParamTraceParent || p[1].Value.String() != "" {
		t.Errorf("arguments = %+v", p)
	}
	tasks := templateNamed(t, wt, argo.Entrypoint).DAG.Tasks
	var order []string
	for _, tk := range tasks {
		order = append(order, tk.Name+"<"+tk.Depends)
	}
	if diff := cmp.Diff([]string{"prepare<", "train<prepare", "evaluate<train"}, order); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
}

func TestRetryBackoffAndNoRetry(t *testing.T) {
	wt := workflowTemplate(t, sdk.NewFlow("f", sdk.Image("busybox")).
		Step("a", sdk.Command("true"), sdk.Retry(4), sdk.RetryBackoff(90*time.Second)).
		Step("b", sdk.Command("true"), sdk.Timeout(1500*time.Millisecond)))
	a := templateNamed(t, wt, "a").RetryStrategy
	if a == nil || a.Limit.IntValue() != 4 || a.Backoff.Duration != "1m30s" || a.Backoff.Factor.IntValue() != 2 || a.Backoff.Cap != "" {
		t.Errorf("a retryStrategy = %+v", a)
	}
	b := templateNamed(t, wt, "b")
	if b.RetryStrategy != nil {
		t.Errorf("a step without Retry is retried: %+v", b.RetryStrategy)
	}
	if b.ActiveDeadlineSeconds.IntValue() != 2 {
		t.Errorf("activeDeadlineSeconds = %v, want 2 (rounded up)", b.ActiveDeadlineSeconds)
	}
}

func TestForeachItemsAndIndex(t *testing.T) {
	wt := workflowTemplate(t, foreachFlow())
	var work wfv1.DAGTask
	for _, tk := range templateNamed(t, wt, argo.Entrypoint).DAG.Tasks {
		if tk.Name == "work" {
			work = tk
		}
	}
	if len(work.WithItems) != 3 {
		t.Fatalf("withItems = %v", work.WithItems)
	}
	for i, item := range []string{"a", "yes", "0123"} {
		pod, err := argopod.Resolve(wt, "work", i)
		if err != nil {
			t.Fatal(err)
		}
		env := map[string]string{}
		for _, e := range pod.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["MANIFOLD_ITEM"] != item || env["MANIFOLD_INDEX"] != string(rune('0'+i)) || env["MANIFOLD_PARAM_P"] != "false" {
			t.Errorf("item %d env = %v", i, env)
		}
	}
}

func TestScheduleIsCronWorkflow(t *testing.T) {
	long := strings.Repeat("x", 40)
	p := mustCompile(t, sdk.NewFlow(long, sdk.Schedule("0 3 * * *"), sdk.Namespace("ml"), sdk.Image("busybox")).
		Step("a", sdk.Command("true")).Step("b", sdk.Command("true"), sdk.After("a")))
	objs, errs := argo.Objects(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if len(objs) != 2 {
		t.Fatalf("got %d objects, want a WorkflowTemplate and a CronWorkflow", len(objs))
	}
	wt := objs[0].(*wfv1.WorkflowTemplate)
	cw, ok := objs[1].(*wfv1.CronWorkflow)
	if !ok {
		t.Fatalf("second object is %T", objs[1])
	}
	if cw.Spec.WorkflowSpec.WorkflowTemplateRef == nil || cw.Spec.WorkflowSpec.WorkflowTemplateRef.Name != wt.Name {
		t.Errorf("workflowTemplateRef = %+v, want %q", cw.Spec.WorkflowSpec.WorkflowTemplateRef, wt.Name)
	}
	if diff := cmp.Diff([]string{"0 3 * * *"}, cw.Spec.Schedules); diff != "" || cw.Spec.ConcurrencyPolicy != wfv1.ForbidConcurrent {
		t.Errorf("schedules %v, concurrencyPolicy %q", cw.Spec.Schedules, cw.Spec.ConcurrencyPolicy)
	}
	if cw.Namespace != "ml" || wt.Namespace != "ml" || len(cw.Name) > 52 {
		t.Errorf("namespaces %q %q, cron name %q", wt.Namespace, cw.Namespace, cw.Name)
	}
	if objs, _ := argo.Objects(mustCompile(t, neuronFlow())); len(objs) != 1 {
		t.Errorf("an unscheduled flow has %d objects", len(objs))
	}
}

func TestOneNamespace(t *testing.T) {
	p := mustCompile(t, sdk.NewFlow("f", sdk.Image("busybox")).
		Step("a", sdk.Command("true"), sdk.Namespace("one")).Step("b", sdk.Command("true"), sdk.Namespace("two")))
	_, errs := argo.Objects(p)
	want := field.ErrorList{field.Invalid(field.NewPath("steps").Key("b").Child("namespace"), nil, "")}
	if diff := cmp.Diff(want, errs, cmpIgnoreDetail); diff != "" {
		t.Fatalf("errors (-want +got):\n%s", diff)
	}
}

func TestLongNamesStayValid(t *testing.T) {
	long := strings.Repeat("x", 40)
	p := mustCompile(t, sdk.NewFlow(long, sdk.Image("busybox"), sdk.Schedule("@daily")).
		Step(long, sdk.Command("true"), sdk.Foreach("a", "b")).
		Step("dag", sdk.Command("true"), sdk.After(long)))
	objs, errs := argo.Objects(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	wt := objs[0].(*wfv1.WorkflowTemplate)
	names := map[string]bool{}
	for _, tmpl := range wt.Spec.Templates {
		if names[tmpl.Name] {
			t.Errorf("two templates are named %q", tmpl.Name)
		}
		names[tmpl.Name] = true
	}
	if len(wt.Name) > 63 || len(objs[1].(*wfv1.CronWorkflow).Name) > 52 {
		t.Errorf("names too long: %q %q", wt.Name, objs[1].(*wfv1.CronWorkflow).Name)
	}
}

func TestEmitIsDeterministicAndDecodesStrictly(t *testing.T) {
	a, errs := emit.Files(argo.Target{}, mustCompile(t, neuronFlow()))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	for range 5 {
		b, _ := emit.Files(argo.Target{}, mustCompile(t, neuronFlow()))
		if !cmp.Equal(a, b) {
			t.Fatalf("two emits differ:\n%s", cmp.Diff(string(a[0].Data), string(b[0].Data)))
		}
	}
	if a[0].Name != "neuron-train.argo.yaml" {
		t.Errorf("file name %q", a[0].Name)
	}
	if n := bytes.Count(a[0].Data, []byte("\n---\n")); n != 1 {
		t.Fatalf("got %d documents, want the WorkflowTemplate alone", n)
	}
	wt := decodeTemplate(t, a[0].Data)
	if diff := cmp.Diff(workflowTemplate(t, neuronFlow()), wt); diff != "" {
		t.Errorf("the YAML does not decode to the WorkflowTemplate (-built +decoded):\n%s", diff)
	}
	for _, noise := range []string{"creationTimestamp", "inputs: {}", "outputs: {}", "arguments: {}", ": null", `name: ""`} {
		if bytes.Contains(a[0].Data, []byte(noise)) {
			t.Errorf("output carries empty noise %q", noise)
		}
	}
}

// TestSharedFieldsWrittenOnce: what every step shares appears once, at workflow
// level, and a step that differs keeps its own.
func TestSharedFieldsWrittenOnce(t *testing.T) {
	wt := workflowTemplate(t, neuronFlow())
	if len(wt.Spec.Tolerations) != 0 {
		t.Errorf("workflow tolerations = %v; tolerations belong beside the requests that need them", wt.Spec.Tolerations)
	}
	if n := len(templateNamed(t, wt, "train").Tolerations); n != 2 {
		t.Errorf("train has %d tolerations, want the flow's and the Neuron one", n)
	}
	if wt.Spec.TemplateDefaults == nil || wt.Spec.TemplateDefaults.Container.Image != "example.com/flow:v1" {
		t.Errorf("templateDefaults = %+v", wt.Spec.TemplateDefaults)
	}
	if img := templateNamed(t, wt, "train").Container.Image; img != "example.com/neuron:v1" {
		t.Errorf("train image = %q", img)
	}
	if wt.Spec.PodMetadata == nil || wt.Spec.PodMetadata.Labels["manifold.dev/flow"] != "neuron-train" {
		t.Errorf("podMetadata = %+v", wt.Spec.PodMetadata)
	}
}

// TestTaskNamesStartWithALetter: Argo refuses a task name that begins with a digit
// in a DAG that uses depends, so such a step's task gets a prefix no step name has.
func TestTaskNamesStartWithALetter(t *testing.T) {
	wt := workflowTemplate(t, sdk.NewFlow("f", sdk.Image("busybox")).
		Step("1st", sdk.Command("true")).
		Step("2nd", sdk.Command("true"), sdk.After("1st")).
		Step("s1st", sdk.Command("true"), sdk.After("1st", "2nd")))
	var got []string
	for _, tk := range templateNamed(t, wt, argo.Entrypoint).DAG.Tasks {
		got = append(got, tk.Name+"="+tk.Template+"<"+tk.Depends)
	}
	want := []string{"S1st=1st<", "S2nd=2nd<S1st", "s1st=s1st<S1st && S2nd"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s", diff)
	}
}

// TestTraceParent: every container of every step, multi-node steps' pods
// included, gets the run's trace context as TRACEPARENT from the reserved
// parameter a traced trigger sets, once and right after the params; when the
// steps share it, it is written once, in templateDefaults.
func TestTraceParent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for name, f := range lintFlows() {
		t.Run(name, func(t *testing.T) {
			p := mustCompile(t, f)
			wt, errs := argo.WorkflowTemplate(p)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			set := false
			for i, a := range wt.Spec.Arguments.Parameters {
				if a.Name == argo.ParamTraceParent {
					if a.Value.String() != "" {
						t.Errorf("%s defaults to %q; want empty", a.Name, a.Value.String())
					}
					wt.Spec.Arguments.Parameters[i].Value = wfv1.AnyStringPtr(tp)
					set = true
				}
			}
			if !set {
				t.Fatalf("no parameter %s among %v", argo.ParamTraceParent, wt.Spec.Arguments.Parameters)
			}
			check := func(what string, c corev1.Container) {
				var names []string
				for _, e := range c.Env {
					names = append(names, e.Name)
				}
				i := slices.Index(names, plan.EnvTraceParent)
				if i < 0 || c.Env[i].Value != tp || slices.Contains(names[i+1:], plan.EnvTraceParent) {
					t.Errorf("%s: env %v; want TRACEPARENT=%s once", what, c.Env, tp)
				}
				for _, prm := range p.Params {
					if j := slices.Index(names, prm.Env); j > i {
						t.Errorf("%s: TRACEPARENT comes before param %s: %v", what, prm.Name, names)
					}
				}
			}
			pods := 0
			for i := range p.Steps {
				s := &p.Steps[i]
				for item := range max(1, len(s.Foreach)) {
					what := fmt.Sprintf("step %s item %d", s.Name, item)
					if s.Nodes > 1 {
						m, err := argopod.Manifest(wt, argo.TaskName(s.Name), 0, runUID)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						ps, err := argopod.ManifestPods(m)
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						for _, pod := range ps {
							check(what, pod.Spec.Containers[0])
							pods++
						}
						break
					}
					pod, err := argopod.Resolve(wt, argo.TaskName(s.Name), item)
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					check(what, pod.Spec.Containers[0])
					pods++
				}
			}
			if pods == 0 {
				t.Fatal("no pods checked")
			}
			if d := wt.Spec.TemplateDefaults; d != nil && d.Container != nil && len(d.Container.Env) > 0 {
				shared := slices.ContainsFunc(d.Container.Env, func(e corev1.EnvVar) bool { return e.Name == plan.EnvTraceParent })
				if !shared {
					t.Errorf("templateDefaults' env %v has the params' variables but not TRACEPARENT", d.Container.Env)
				}
			}
		})
	}
}
