// Package argo emits a flow as an Argo Workflows WorkflowTemplate: an entrypoint
// DAG template with one task per step, and one container template per step that
// carries the pod emit.Pod builds for it. A flow with a schedule also gets a
// CronWorkflow that runs the template through workflowTemplateRef.
//
// How the flow maps:
//
//   - order: each task `depends` on the steps it waits for;
//   - foreach: the task runs withItems, one item object {value, index} per item,
//     passed to the template as the input parameters item and index, which become
//     MANIFOLD_ITEM and MANIFOLD_INDEX (Argo has no index variable for withItems);
//   - a fan-out over a value found at run time (sdk.ForeachOf): withParam over
//     the indexes of the list the producer publishes as an output parameter
//     (valueFrom.path in MANIFOLD_VALUES, an emptyDir), each item's element,
//     index and count passed through expressions that read the output as data;
//     a branch (sdk.When): a when that compares the output, decoded, with the
//     step's value; a step after steps that may not run: a depends that waits
//     only for those that ran (see dynamic.go). Such a flow needs an artifact
//     store, and is never split;
//   - params: spec.arguments.parameters, read by every step as
//     {{workflow.parameters.NAME}};
//   - retry: retryStrategy with retryPolicy Always (like a Job's backoffLimit, any
//     failed attempt is retried, whether the container failed or the pod did) and a
//     backoff doubling from RetryBackoff, or from Kubernetes' 10s capped at 6m;
//   - timeout: the template's activeDeadlineSeconds, which bounds each attempt's pod;
//   - multi-node (Nodes > 1): a resource template (action create, setOwnerReference,
//     so deleting the workflow deletes the object) whose manifest is the jobset
//     target's JobSet for the step, one replicated job per foreach item and no
//     withItems, waited on through status.terminalState. With manifold.toml's
//     argo_multi_node = "job" it is instead the job target's headless Service and
//     Indexed Job, created by two resource templates (Argo's takes one object),
//     the Job's task after the Service's and dependents after the Job's, foreach
//     items through withItems. The objects' names end in RunToken, the first
//     characters of the workflow's uid, so each run has its own, and MASTER_ADDR
//     names them. Retry is the object's own (the JobSet's failurePolicy.maxRestarts,
//     restarting every node together; the Job's backoffLimitPerIndex, retrying each
//     node alone), never a retryStrategy: a retry of the template would create an
//     object of a name that exists. A JobSet needs the JobSet controller; either
//     way the workflow's service account needs RBAC to create and get the objects;
//   - "{{": Argo reads it as a template tag wherever it is, so a command,
//     variable, param default or foreach item that holds one is written with
//     each "{{" as $(MANIFOLD_BRACES), which the kubelet expands in the
//     container from <flow>.literals.yaml, a ConfigMap applied beside the
//     WorkflowTemplate (see Carry); so is a value a run gives a param, and the
//     steps of a flow with params always read it; an image, annotation or
//     volume path, which the kubelet does not expand, cannot hold one;
//   - a param's default or foreach item holding a character that Argo's
//     substitution cannot write as JSON (Substitutable) is refused;
//   - DRA: a step's pod claims (resourceClaims) reach its pod through
//     podSpecPatch, its container's through the container template, and a
//     multi-node step's through its object's pod template; the
//     ResourceClaimTemplates they name are in <flow>.claims.yaml, applied beside
//     the WorkflowTemplate.
//
// The output stays compact: a pod field that every step shares is written once,
// at workflow level (podMetadata, nodeSelector, securityContext,
// serviceAccountName, imagePullSecrets) or in templateDefaults (the container's
// image, pull policy, the params' variables and TRACEPARENT), only where Argo's controller gives
// every step back exactly the pod emit.Pod built. The executor pod of a resource
// template takes the workflow-level fields too, so they are computed from the
// container steps alone, and a nodeSelector is not shared when a multi-node step
// exists.
package argo

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/plan"
)

// Entrypoint is the name of the DAG template. Step templates are named after their
// steps, which are lowercase DNS labels, so an uppercase name never collides.
const Entrypoint = "DAG"

// Input parameter names of a foreach step's template, and the keys of its items.
const (
	InputItem  = "item"
	InputIndex = "index"
	itemValue  = "value"
	itemIndex  = "index"
)

// maxCronWorkflowName is the longest CronWorkflow name Argo accepts: its Workflows
// add an 11-character suffix.
const maxCronWorkflowName = 52

// Kubernetes' Job retry delay, which the Argo target keeps when the step chooses
// none, so a step is retried on the same rhythm on both targets.
const (
	retryDelay    = 10 * time.Second
	maxRetryDelay = 6 * time.Minute
)

// Target is the argo target.
type Target struct{}

var _ emit.Target = Target{}

// Name returns "argo".
func (Target) Name() string { return "argo" }

// Outputs names the files Emit may write for flow: see emit.Target.
func (Target) Outputs(flow string) []string {
	return []string{flow + ".argo.yaml", flow + LiteralsFileSuffix, flow + emit.ClaimsFileSuffix}
}

// Emit writes <flow>.argo.yaml: the WorkflowTemplate (for a flow split into
// parts, each part's and then the parent's: see Objects), then the
// CronWorkflow when the flow has a schedule; <flow>.literals.yaml, the
// ConfigMap (Literals), when a value holds "{{" or the flow has params; and <flow>.claims.yaml
// (emit.ClaimsFile) when a step has DRA devices. One file holds every
// WorkflowTemplate, so that `kubectl apply -f` of it (or `deploy`) puts the
// parts and their parent on the cluster together.
//
// The objects are written as they are made (see writeTemplates): no
// WorkflowTemplate of more than PartMaxNodes nodes is ever held whole, and a
// split flow holds one part (at most PartNodes nodes, or PartMaxNodes for a
// part of one larger step) at a time.
func (Target) Emit(f *plan.Flow, create emit.Create) field.ErrorList {
	if errs := check(f); len(errs) > 0 {
		return errs
	}
	if errs := writeTemplates(f, create); len(errs) > 0 {
		return errs
	}
	if errs := literalsFile(create, f); len(errs) > 0 {
		return errs
	}
	return emit.ClaimsFile(create, f)
}

// Objects returns the flow's WorkflowTemplate and, for a scheduled flow, its
// CronWorkflow.
//
// A flow whose WorkflowTemplate would be more than argo_max_bytes or
// PartMaxBytes bytes, or its Workflow more than PartMaxNodes nodes, is split
// (see PartMaxBytes): Objects then returns each part's WorkflowTemplate
// (PartName, in the order of Cut), then the parent's, which has the name the
// flow's one WorkflowTemplate would have, then the CronWorkflow, which runs the
// parent. With argo_max_bytes -1 a flow is never split.
func Objects(f *plan.Flow) ([]any, field.ErrorList) {
	wt, errs := WorkflowTemplate(f)
	if len(errs) > 0 {
		return nil, errs
	}
	n, err := size(wt)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	wts, errs := split(f, wt, n)
	if len(errs) > 0 {
		return nil, errs
	}
	var out []any
	if wts != nil {
		// The parts first, so that applying the file creates each before the
		// parent that runs it.
		for _, c := range wts[1:] {
			out = append(out, c)
		}
		wt = wts[0]
	}
	out = append(out, wt)
	if f.Schedule != "" {
		out = append(out, CronWorkflow(f, wt))
	}
	return out, nil
}

// PodOptions are the values Argo fills in at run time: params as
// {{workflow.parameters.NAME}}, a foreach step's item and index (and, for
// sdk.ForeachOf, the count) as its template's input parameters, the run's ID as the workflow's name (RunID), and
// TRACEPARENT as the reserved parameter ParamTraceParent.
func PodOptions(s *plan.Step) emit.PodOptions {
	o := emit.PodOptions{Param: func(p plan.Param) string { return paramTag(p.Name) }, RunID: RunID, TraceParent: paramTag(ParamTraceParent)}
	if s.Foreach != nil {
		o.Item = &emit.Item{Value: "{{inputs.parameters." + InputItem + "}}", Index: "{{inputs.parameters." + InputIndex + "}}"}
	}
	if s.ForeachOf != nil {
		o.Item = &emit.Item{Value: inputTag(InputItem), Index: inputTag(InputIndex), Count: inputTag(InputCount)}
	}
	return o
}

// RunID is the run ID of a step's pod (MANIFOLD_RUN_ID, with an artifact store):
// the name of the workflow, which is unique among the workflows of its namespace
// and which every step of one run shares.
const RunID = "{{workflow.name}}"

// ParamTraceParent is the reserved workflow parameter that every step's
// container gets as TRACEPARENT (plan.EnvTraceParent): a traced trigger sets
// it to the trace context of the run's span, so the steps continue the run's
// trace; it is empty otherwise. It begins with "_", which a flow's param
// cannot.
const ParamTraceParent = "_manifold-traceparent"

// paramTag is Argo's reference to the flow param called name.
func paramTag(name string) string { return "{{workflow.parameters." + name + "}}" }

// CronWorkflow runs wt on the flow's schedule, one run at a time.
func CronWorkflow(f *plan.Flow, wt *wfv1.WorkflowTemplate) *wfv1.CronWorkflow {
	return &wfv1.CronWorkflow{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "CronWorkflow"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      emit.Name(maxCronWorkflowName, f.Name),
			Namespace: wt.Namespace,
			Labels:    wt.Labels,
		},
		Spec: wfv1.CronWorkflowSpec{
			Schedules:         []string{f.Schedule},
			ConcurrencyPolicy: wfv1.ForbidConcurrent,
			WorkflowSpec: wfv1.WorkflowSpec{
				WorkflowTemplateRef: &wfv1.WorkflowTemplateRef{Name: wt.Name},
			},
		},
	}
}

// WorkflowTemplate builds the flow's WorkflowTemplate, with every step: the
// one the argo target writes for a flow it does not split (see Objects).
func WorkflowTemplate(f *plan.Flow) (*wfv1.WorkflowTemplate, field.ErrorList) {
	errs := check(f)
	if len(errs) > 0 {
		return nil, errs
	}
	return build(f, emit.Name(emit.MaxNameLength, f.Name), nil, RunID)
}

// build returns the WorkflowTemplate called name that runs the steps of f that
// in holds (every step when in is nil), each waiting only for the steps among
// them it waits for, with runID as the steps' run ID.
func build(f *plan.Flow, name string, in []bool, runID string) (*wfv1.WorkflowTemplate, field.ErrorList) {
	cf, literal := carried(f)
	return buildCarried(cf, literal, name, in, runID)
}

// buildCarried is build for f as carried returns it.
func buildCarried(f *plan.Flow, literal bool, name string, in []bool, runID string) (*wfv1.WorkflowTemplate, field.ErrorList) {
	m := newMakerCarried(f, literal, name, in, runID, true)
	spec := m.spec
	// Each step has a template and a task, a multi-node step up to three.
	n := len(f.Steps)
	if in != nil {
		n = 0
		for _, ok := range in {
			if ok {
				n++
			}
		}
	}
	dag := &wfv1.DAGTemplate{Tasks: make([]wfv1.DAGTask, 0, n)}
	spec.Templates = make([]wfv1.Template, 1, 1+n)
	spec.Templates[0] = wfv1.Template{Name: Entrypoint, DAG: dag}
	for i := range m.f.Steps {
		if !m.has(i) {
			continue
		}
		ts, tks, errs := m.step(i, true)
		if len(errs) > 0 {
			return nil, errs
		}
		spec.Templates = append(spec.Templates, ts...)
		dag.Tasks = append(dag.Tasks, tks...)
	}
	if in != nil {
		// A part's tasks wait only for the tasks of the part: the parent runs
		// the part once the parts holding the others have succeeded.
		tasks := map[string]bool{}
		for _, tk := range dag.Tasks {
			tasks[tk.Name] = true
		}
		for i := range dag.Tasks {
			var kept []string
			for d := range strings.SplitSeq(dag.Tasks[i].Depends, " && ") {
				if tasks[d] {
					kept = append(kept, d)
				}
			}
			dag.Tasks[i].Depends = strings.Join(kept, " && ")
		}
	}

	return &wfv1.WorkflowTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "WorkflowTemplate"},
		ObjectMeta: objectMeta(m.f, name),
		Spec:       spec,
	}, nil
}

// maker makes the WorkflowTemplate of some steps of a flow a step at a time:
// build makes it whole, and document as it is written.
type maker struct {
	f       *plan.Flow // the flow, its "{{" carried (see carried)
	literal bool
	in      []bool
	runID   string
	name    string
	// spec holds the workflow-level fields, without templates; sh what they
	// share with every step.
	spec wfv1.WorkflowSpec
	sh   shared
	// pods are the container steps' pods by index, when kept.
	pods map[int]*corev1.PodTemplateSpec
	// counting, when set, counts each container step's pod as its template
	// is made: spec and sh are a guess (see newGuessingMaker), checked
	// against what counting finds once every template is made. multi is
	// whether the flow has a multi-node step.
	counting *sharing
	multi    bool
	// dyn is what the tasks and templates of a dynamic flow need; nil for a
	// flow without dynamic steps.
	dyn *dynamicFlow
}

// newMaker returns the maker of the WorkflowTemplate called name of the steps
// of f that in holds (every step when in is nil), with runID as the steps' run
// ID. It builds each container step's pod to find what the steps share, and
// keeps them when keep is set; else each is built again as its template is
// made, so that the pods are never held together.
func newMaker(f *plan.Flow, name string, in []bool, runID string, keep bool) *maker {
	f, literal := carried(f)
	return newMakerCarried(f, literal, name, in, runID, keep)
}

// newMakerCarried is newMaker for f as carried returns it.
func newMakerCarried(f *plan.Flow, literal bool, name string, in []bool, runID string, keep bool) *maker {
	m := &maker{f: f, literal: literal, in: in, runID: runID, name: name, dyn: newDynamicFlow(f)}
	if keep {
		m.pods = map[int]*corev1.PodTemplateSpec{}
	}
	// The pods of the container steps; a multi-node step's pods are inside the
	// object its resource template creates.
	var sh sharing
	multi := false
	for i := range f.Steps {
		if !m.has(i) {
			continue
		}
		if f.Steps[i].Nodes > 1 {
			multi = true
			continue
		}
		pod := m.pod(i)
		sh.add(&pod)
		if keep {
			m.pods[i] = &pod
		}
	}
	m.spec, m.sh = workflowSpec(f, &sh, multi, literal)
	return m
}

// guessPods is how many container steps' pods newGuessingMaker counts to
// guess what the steps share.
const guessPods = 16

// newGuessingMaker returns the maker of f's one WorkflowTemplate called name,
// for the measuring pass alone (costs), which builds each container step's
// pod once rather than twice: what the steps share is guessed from the pods of
// the first guessPods container steps, and each step's template is made with
// the guess from a pod that is also counted to find what they share in truth.
// Once every template is made, costs compares the two, and measures again
// with the truth when the guess proves wrong.
func newGuessingMaker(f *plan.Flow, name string) *maker {
	f, literal := carried(f)
	m := &maker{f: f, literal: literal, runID: RunID, name: name, counting: &sharing{}, dyn: newDynamicFlow(f)}
	var guess sharing
	for i := range f.Steps {
		if f.Steps[i].Nodes > 1 {
			m.multi = true
			continue
		}
		if guess.n < guessPods {
			pod := m.pod(i)
			guess.add(&pod)
		}
	}
	m.spec, m.sh = workflowSpec(f, &guess, m.multi, literal)
	return m
}

// has reports whether step i is one of the maker's.
func (m *maker) has(i int) bool { return m.in == nil || m.in[i] }

// pod builds the pod of container step i.
func (m *maker) pod(i int) corev1.PodTemplateSpec {
	s := &m.f.Steps[i]
	o := PodOptions(s)
	o.RunID = m.runID
	o.Values = m.dyn.publishes(s.Name)
	pod := emit.Pod(m.f, s, o)
	if m.literal {
		withBraces(m.f.Name, &pod.Spec)
	}
	// Argo creates the pod itself, so Kueue admits it as a plain pod (its pod
	// integration), by the pod's own queue label.
	pod.Labels = emit.Queued(pod.Labels, s)
	return pod
}

// step returns the templates (when templates is set) and the tasks of step i.
func (m *maker) step(i int, templates bool) ([]wfv1.Template, []wfv1.DAGTask, field.ErrorList) {
	s := &m.f.Steps[i]
	if s.Nodes > 1 && !templates {
		tks, err := multiNodeTasks(m.f, s)
		if err != nil {
			return nil, nil, field.ErrorList{field.InternalError(stepPath(s), err)}
		}
		return nil, tks, nil
	}
	if s.Nodes > 1 {
		ts, tks, err := multiNode(m.f, s, m.literal, m.runID)
		if err != nil {
			return nil, nil, field.ErrorList{field.InternalError(stepPath(s), err)}
		}
		return ts, tks, nil
	}
	var ts []wfv1.Template
	if templates {
		var pod corev1.PodTemplateSpec
		if m.pods != nil {
			pod = *m.pods[i]
		} else {
			pod = m.pod(i)
			if m.counting != nil {
				m.counting.add(&pod)
			}
		}
		t, err := stepTemplate(s, pod, m.sh)
		if err != nil {
			return nil, nil, field.ErrorList{field.InternalError(stepPath(s), err)}
		}
		m.dyn.template(s, &t)
		ts = []wfv1.Template{t}
	}
	tk, err := task(s)
	if err != nil {
		return nil, nil, field.ErrorList{field.InternalError(stepPath(s).Child("foreach"), err)}
	}
	m.dyn.task(s, &tk)
	return ts, []wfv1.DAGTask{tk}, nil
}

// objectMeta is the metadata of f's object called name: in the namespace where
// every step runs, labelled as part of Manifold and of the flow.
func objectMeta(f *plan.Flow, name string) metav1.ObjectMeta {
	var namespace string
	if len(f.Steps) > 0 {
		namespace = f.Steps[0].Namespace
	}
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    map[string]string{plan.LabelPartOf: plan.PartOf, plan.LabelFlow: f.Name},
	}
}

// check returns what f asks that an Argo workflow cannot carry: a "{{" where
// Argo substitutes template tags and nothing Kubernetes reads can stand in for
// it (commands, variables, params and foreach items hold any "{{": see Carry),
// and a param's default or a foreach item holding a character that Argo's
// substitution cannot write (Substitutable).
func check(f *plan.Flow) field.ErrorList {
	errs := checkDynamic(f)
	for _, p := range f.Params {
		if err := Substitutable(p.Value); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("params").Key(p.Name).Child("default"), p.Value, "a param's value: "+err.Error()))
		}
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		at := stepPath(s)
		for j, item := range s.Foreach {
			if err := Substitutable(item); err != nil {
				errs = append(errs, field.Invalid(at.Child("foreach").Index(j), item, "a foreach item: "+err.Error()))
			}
		}
		if i > 0 && s.Namespace != f.Steps[0].Namespace {
			errs = append(errs, field.Invalid(at.Child("namespace"), s.Namespace, fmt.Sprintf(
				"an Argo workflow runs every step in its own namespace, and step %s runs in %q; give every step the same namespace", f.Steps[0].Name, f.Steps[0].Namespace)))
		}
		errs = append(errs, noTags(at.Child("image"), s.Image,
			"the kubelet pulls the image as named, without expanding $(NAME) in it, so nothing can stand in for the \"{{\"; name the image without \"{{\"")...)
		for _, a := range s.Annotations {
			errs = append(errs, noTags(at.Child("annotations").Key(a.Key), a.Value,
				"a pod's annotation is written as it is, with nothing to read \"{{\" from instead; pass the value as a variable (sdk.Env), which the argo target carries as written, or compile with --target job, jobset or airflow")...)
		}
		for j, v := range s.Volumes {
			errs = append(errs, noTags(at.Child("volumes").Index(j).Child("path"), v.Path,
				"the kubelet mounts at the path as written, without expanding $(NAME) in it, so nothing can stand in for the \"{{\"; choose a path without \"{{\"")...)
		}
	}
	return errs
}

// noTags refuses a value holding "{{", which Argo would read as a template tag
// and substitute, or refuse the workflow over, instead of passing it on; why
// says why nothing can stand in for it there, and what to do.
func noTags(at *field.Path, value, why string) field.ErrorList {
	if !strings.Contains(value, "{{") {
		return nil
	}
	return field.ErrorList{field.Invalid(at, value, "Argo reads \"{{\" as the start of a template tag, so the value would not reach the pod as written: "+why)}
}

func stepPath(s *plan.Step) *field.Path { return field.NewPath("steps").Key(s.Name) }

// TaskName is the DAG task of the step called step: the step's name, or, when that
// begins with a digit (which Argo refuses in a task that depends or is depended on),
// the name after "S". Step names are lowercase, so the uppercase S never makes two
// names equal.
func TaskName(step string) string {
	if step != "" && step[0] >= '0' && step[0] <= '9' {
		return "S" + step
	}
	return step
}

// task is the DAG task that runs step s.
func task(s *plan.Step) (wfv1.DAGTask, error) {
	after := make([]string, len(s.After))
	for i, a := range s.After {
		after[i] = TaskName(a)
	}
	t := wfv1.DAGTask{Name: TaskName(s.Name), Template: s.Name, Depends: strings.Join(after, " && ")}
	if s.Foreach != nil {
		t.Arguments.Parameters = []wfv1.Parameter{
			{Name: InputItem, Value: wfv1.AnyStringPtr("{{item." + itemValue + "}}")},
			{Name: InputIndex, Value: wfv1.AnyStringPtr("{{item." + itemIndex + "}}")},
		}
		for i, v := range s.Foreach {
			item, err := json.Marshal(map[string]string{itemValue: v, itemIndex: strconv.Itoa(i)})
			if err != nil {
				return t, err
			}
			t.WithItems = append(t.WithItems, wfv1.Item{Value: item})
		}
	}
	return t, nil
}

// shared holds the pod fields written once for every step: at workflow level or in
// templateDefaults. A step template leaves out each field equal to the shared one.
type shared struct {
	labels, annotations map[string]string
	nodeSelector        map[string]string
	securityContext     *corev1.PodSecurityContext
	serviceAccount      string
	imagePullSecrets    []corev1.LocalObjectReference
	container           corev1.Container // image, imagePullPolicy, securityContext and the leading env
}

// workflowSpec returns the spec's workflow-level fields and what they share.
//
// Argo's controller builds a step's pod from its template, falling back field by
// field to the workflow: nodeSelector, tolerations, securityContext and
// serviceAccountName are the template's when it sets them, else the workflow's; pod
// labels and annotations are the workflow's podMetadata overlaid with the
// template's metadata; imagePullSecrets exist only at workflow level; and
// templateDefaults is strategically merged under every template. So a value moves
// to workflow level only when no step lacks it (a step without its own would take
// the workflow's), and a step keeps its own when it differs. Tolerations stay in
// every template, beside the accelerator requests that need them.
//
// pods are the container steps' pods only. The executor pod of a resource template
// (a multi-node step's) takes the workflow-level fields too, so when resources is
// set no nodeSelector is shared: a step's accelerator instance type would strand
// the executor on (or away from, with no toleration) nodes it has no use for.
func workflowSpec(f *plan.Flow, pods *sharing, resources, literal bool) (wfv1.WorkflowSpec, shared) {
	spec := wfv1.WorkflowSpec{Entrypoint: Entrypoint}
	for _, p := range f.Params {
		spec.Arguments.Parameters = append(spec.Arguments.Parameters, wfv1.Parameter{Name: p.Name, Value: wfv1.AnyStringPtr(p.Value)})
	}
	spec.Arguments.Parameters = append(spec.Arguments.Parameters, wfv1.Parameter{Name: ParamTraceParent, Value: wfv1.AnyStringPtr("")})
	var sh shared
	// imagePullSecrets have no template field: the workflow's serve every step
	// that needs no others.
	if pods.n > 0 && len(pods.pullSecrets) > 0 && pods.samePullSecrets {
		sh.imagePullSecrets, spec.ImagePullSecrets = pods.pullSecrets, pods.pullSecrets
	}
	if pods.n < 2 {
		return spec, sh
	}
	sh.labels = pods.labels.value()
	sh.annotations = pods.annotations.value()
	// Kueue's keys stay in each template: on the executor pod of a resource
	// template they would have Kueue queue that pod too.
	delete(sh.labels, plan.LabelQueueName)
	delete(sh.labels, plan.LabelPriorityClass)
	delete(sh.annotations, plan.AnnotationRequiredTopology)
	if len(sh.labels) > 0 || len(sh.annotations) > 0 {
		spec.PodMetadata = &wfv1.Metadata{Labels: sh.labels, Annotations: sh.annotations}
	}
	if !resources {
		sh.nodeSelector = pods.nodeSelector.value()
	}
	sh.securityContext = pods.securityContext.value()
	sh.serviceAccount = pods.serviceAccount.value()
	spec.NodeSelector, spec.SecurityContext, spec.ServiceAccountName = sh.nodeSelector, sh.securityContext, sh.serviceAccount

	sh.container.Image = pods.image.value()
	sh.container.ImagePullPolicy = pods.pullPolicy.value()
	// The container's security context is the same for every step but those
	// with EFA wiring, which write their own whole (a strategic merge replaces
	// the capability lists).
	sh.container.SecurityContext = pods.containerSecurity.value()
	// Every step's environment starts with the params' variables and TRACEPARENT,
	// the same for all steps on Argo, after BracesEnv when the flow carries "{{".
	n := len(f.Params) + 1
	if literal {
		n++
	}
	sh.container.Env = pods.env[:n:n]
	if !reflect.DeepEqual(sh.container, corev1.Container{}) {
		c := sh.container
		c.Name = plan.ContainerName // the container's name is always written; give it its value
		spec.TemplateDefaults = &wfv1.Template{Container: &c}
	}
	return spec, sh
}

// sharing finds, a pod at a time, what the container steps' pods share (see
// workflowSpec), so that the pods need not be held together.
type sharing struct {
	n int
	// The first pod's image pull secrets, and whether every pod has the same.
	pullSecrets     []corev1.LocalObjectReference
	samePullSecrets bool
	// The first pod's main container's environment.
	env                 []corev1.EnvVar
	labels, annotations commonPairs
	nodeSelector        mostCommon[map[string]string]
	securityContext     mostCommon[*corev1.PodSecurityContext]
	serviceAccount      mostCommon[string]
	image               mostCommon[string]
	pullPolicy          mostCommon[corev1.PullPolicy]
	containerSecurity   mostCommon[*corev1.SecurityContext]
}

// add counts pod in.
func (s *sharing) add(pod *corev1.PodTemplateSpec) {
	main := &pod.Spec.Containers[0]
	if s.n == 0 {
		s.pullSecrets, s.samePullSecrets = pod.Spec.ImagePullSecrets, true
		s.env = main.Env
	} else if s.samePullSecrets && !reflect.DeepEqual(pod.Spec.ImagePullSecrets, s.pullSecrets) {
		s.samePullSecrets = false
	}
	s.n++
	s.labels.add(pod.Labels)
	s.annotations.add(pod.Annotations)
	s.nodeSelector.add(pod.Spec.NodeSelector)
	s.securityContext.add(pod.Spec.SecurityContext)
	s.serviceAccount.add(pod.Spec.ServiceAccountName)
	s.image.add(main.Image)
	s.pullPolicy.add(main.ImagePullPolicy)
	s.containerSecurity.add(main.SecurityContext)
}

// stepTemplate is the container template that runs pod for step s, less what sh
// already gives it.
func stepTemplate(s *plan.Step, pod corev1.PodTemplateSpec, sh shared) (wfv1.Template, error) {
	spec := pod.Spec
	c := spec.Containers[0]
	if c.Image == sh.container.Image {
		c.Image = ""
	}
	if c.ImagePullPolicy == sh.container.ImagePullPolicy {
		c.ImagePullPolicy = ""
	}
	c.SecurityContext = unless(c.SecurityContext, sh.container.SecurityContext)
	// A strategic merge puts the template's own variables before those only the
	// defaults have, so the params' variables can come from templateDefaults only
	// when the step has no others; otherwise the template lists them all, in order.
	if len(c.Env) == len(sh.container.Env) {
		c.Env = nil
	}
	t := wfv1.Template{
		Name: s.Name,
		Metadata: wfv1.Metadata{
			Labels:      minus(pod.Labels, sh.labels),
			Annotations: minus(pod.Annotations, sh.annotations),
		},
		Container:          &c,
		Volumes:            spec.Volumes,
		NodeSelector:       unless(spec.NodeSelector, sh.nodeSelector),
		Tolerations:        spec.Tolerations,
		SecurityContext:    unless(spec.SecurityContext, sh.securityContext),
		ServiceAccountName: unless(spec.ServiceAccountName, sh.serviceAccount),
		Affinity:           spec.Affinity,
		SchedulerName:      spec.SchedulerName,
		PriorityClassName:  spec.PriorityClassName,
		RetryStrategy:      retryStrategy(s),
	}
	if d := spec.ActiveDeadlineSeconds; d != nil {
		t.ActiveDeadlineSeconds = deadline(*d)
	}
	if s.Foreach != nil {
		t.Inputs.Parameters = []wfv1.Parameter{{Name: InputItem}, {Name: InputIndex}}
	}

	// What the template has no field for goes into podSpecPatch, which Argo applies
	// last as a strategic merge patch of the pod spec.
	rest := spec
	rest.Containers, rest.RestartPolicy, rest.Volumes = nil, "", nil
	rest.NodeSelector, rest.Tolerations, rest.SecurityContext, rest.ServiceAccountName = nil, nil, nil, ""
	rest.Affinity, rest.SchedulerName, rest.PriorityClassName, rest.ActiveDeadlineSeconds = nil, "", "", nil
	if reflect.DeepEqual(rest.ImagePullSecrets, sh.imagePullSecrets) {
		rest.ImagePullSecrets = nil
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		return t, fmt.Errorf("restartPolicy %q: Argo runs every pod with Never", spec.RestartPolicy)
	}
	patch, err := podSpecPatch(rest)
	if err != nil {
		return t, err
	}
	t.PodSpecPatch = patch
	return t, nil
}

// podSpecPatch returns rest as a pod spec patch, or "" when it sets nothing.
//
// The spec is written by encode.JSON, which walks the values it holds, rather
// than by encoding/json, which first makes its encoders for every type a
// PodSpec can hold: in a new process, that was most of this function's time.
// Decoded into a generic tree and encoded again, the patch is in the bytes
// encoding/json gives it (keys sorted, <, > and & escaped).
func podSpecPatch(rest corev1.PodSpec) (string, error) {
	data, err := encode.JSON(rest, "")
	if err != nil {
		return "", err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return "", err
	}
	// containers has no omitempty; a patch setting it to null would remove them.
	delete(m, "containers")
	if len(m) == 0 {
		return "", nil
	}
	data, err = json.Marshal(m)
	return string(data), err
}

// retryStrategy maps Retry and RetryBackoff; nil when the step is not retried.
func retryStrategy(s *plan.Step) *wfv1.RetryStrategy {
	if s.Retry == 0 {
		return nil
	}
	backoff := &wfv1.Backoff{Duration: retryDelay.String(), Factor: new(intstr.FromInt32(2)), Cap: maxRetryDelay.String()}
	if s.RetryBackoff > 0 {
		backoff = &wfv1.Backoff{Duration: s.RetryBackoff.String(), Factor: new(intstr.FromInt32(2))}
	}
	return &wfv1.RetryStrategy{
		Limit:       new(intstr.FromInt32(int32(s.Retry))),
		RetryPolicy: wfv1.RetryPolicyAlways,
		Backoff:     backoff,
	}
}

// mostCommon finds the value most pods share (the first of equals), or the
// zero value when some pod has none or no two pods share one.
type mostCommon[T any] struct {
	none      bool
	counts    map[string]int
	best      T
	bestCount int
}

// add counts v, one pod's value.
func (c *mostCommon[T]) add(v T) {
	if c.none {
		return
	}
	if isZero(v) {
		c.none = true
		return
	}
	key, err := json.Marshal(v)
	if err != nil {
		c.none = true
		return
	}
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[string(key)]++
	if n := c.counts[string(key)]; n > c.bestCount {
		c.best, c.bestCount = v, n
	}
}

// value returns the value most pods share.
func (c *mostCommon[T]) value() T {
	var zero T
	if c.none || c.bestCount < 2 {
		return zero
	}
	return c.best
}

// isZero reports whether v is empty: zero, or a map or slice without elements.
func isZero(v any) bool {
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Map, reflect.Slice:
		return r.Len() == 0
	case reflect.Invalid:
		return true
	}
	return r.IsZero()
}

// unless returns v, or the zero value when v equals the shared value.
func unless[T any](v, sharedValue T) T {
	var zero T
	if !isZero(sharedValue) && reflect.DeepEqual(v, sharedValue) {
		return zero
	}
	return v
}

// commonPairs finds the entries every pod has.
type commonPairs struct {
	pairs map[string]string
	n     int
}

// add takes out of the entries those m, one pod's, lacks.
func (c *commonPairs) add(m map[string]string) {
	if c.n++; c.n == 1 {
		c.pairs = maps.Clone(m)
		return
	}
	maps.DeleteFunc(c.pairs, func(k, v string) bool { w, ok := m[k]; return !ok || w != v })
}

// value returns the entries every pod has, nil when none.
func (c *commonPairs) value() map[string]string {
	if len(c.pairs) == 0 {
		return nil
	}
	return c.pairs
}

// minus returns m without the entries of sub.
func minus(m, sub map[string]string) map[string]string {
	out := maps.Clone(m)
	maps.DeleteFunc(out, func(k, v string) bool { w, ok := sub[k]; return ok && w == v })
	if len(out) == 0 {
		return nil
	}
	return out
}
