// Package argopod works out, for tests, the pod Argo Workflows' controller
// (v3.7.18) would create for a step of a WorkflowTemplate: the template with
// templateDefaults strategically merged under it, parameters substituted, then the
// pod assembled as workflow/controller/workflowpod.go's createWorkflowPod does
// (template fields first, falling back to the workflow's; podMetadata overlaid by
// the template's metadata; workflow imagePullSecrets; podSpecPatch applied last as a
// strategic merge patch of the pod spec).
//
// It leaves out what the controller adds for its own executor, which no other
// target has and which Manifold's steps never see: the init and wait containers,
// the var-run-argo and tmp-dir-argo volumes and their mounts, the argoexec prefix
// of the main container's command, the ARGO_* variables, and the workflow's own
// pod labels and annotations (workflows.argoproj.io/...).
//
// For a resource template (a multi-node step) it works out the manifest the
// executor creates, after the controller's substitution, and the pods in it.
//
// Canonical and Expanded work out what the kubelet makes of a container's
// variables, command and arguments ($(NAME) expansion, variables read from a
// ConfigMap), so that a pod of the argo target, which writes a value holding
// "{{" otherwise, can be compared with another target's.
package argopod

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/plan"
)

// Resolve returns the pod of the DAG task named task in wt, for item index item of
// a withItems task (ignored otherwise), with every parameter at its default.
func Resolve(wt *wfv1.WorkflowTemplate, task string, item int) (corev1.PodTemplateSpec, error) {
	spec := &wt.Spec
	t, tmpl, err := taskTemplate(spec, task)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	if tmpl.Container == nil {
		return corev1.PodTemplateSpec{}, fmt.Errorf("task %q: template %q is not a container template", task, t.Template)
	}
	tmpl, err = withDefaults(tmpl, spec.TemplateDefaults)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	params, err := taskParams(spec, t, tmpl, item)
	if err != nil {
		return corev1.PodTemplateSpec{}, err
	}
	if err := substituteJSON(tmpl, params); err != nil {
		return corev1.PodTemplateSpec{}, err
	}

	c := *tmpl.Container
	c.Name = "main"
	pod := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			RestartPolicy:    corev1.RestartPolicyNever,
			Volumes:          tmpl.Volumes,
			ImagePullSecrets: spec.ImagePullSecrets,
			Containers:       []corev1.Container{c},
		},
	}
	if d := tmpl.ActiveDeadlineSeconds; d != nil {
		v := int64(d.IntValue())
		pod.Spec.ActiveDeadlineSeconds = &v
	}
	// The DAG template, the boundary between workflow and step, sets none of
	// these, so the workflow's value is the fallback.
	pod.Spec.ServiceAccountName = first(tmpl.ServiceAccountName, spec.ServiceAccountName)
	pod.Spec.NodeSelector = first(tmpl.NodeSelector, spec.NodeSelector)
	pod.Spec.Affinity = first(tmpl.Affinity, spec.Affinity)
	pod.Spec.Tolerations = first(tmpl.Tolerations, spec.Tolerations)
	pod.Spec.SchedulerName = first(tmpl.SchedulerName, spec.SchedulerName)
	pod.Spec.PriorityClassName = first(tmpl.PriorityClassName, spec.PodPriorityClassName)
	pod.Spec.SecurityContext = first(tmpl.SecurityContext, spec.SecurityContext)
	if m := spec.PodMetadata; m != nil {
		maps.Copy(pod.Annotations, m.Annotations)
		maps.Copy(pod.Labels, m.Labels)
	}
	maps.Copy(pod.Annotations, tmpl.Metadata.Annotations)
	maps.Copy(pod.Labels, tmpl.Metadata.Labels)
	// Volumes of the workflow that the container mounts and the template lacks.
	for _, m := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == m.Name && !hasVolume(pod.Spec.Volumes, v.Name) {
				pod.Spec.Volumes = append(pod.Spec.Volumes, v)
			}
		}
	}

	for _, patch := range []string{spec.PodSpecPatch, tmpl.PodSpecPatch} {
		if patch == "" {
			continue
		}
		if err := patchSpec(&pod.Spec, substitute(patch, params)); err != nil {
			return corev1.PodTemplateSpec{}, err
		}
	}
	if len(pod.Labels) == 0 {
		pod.Labels = nil
	}
	if len(pod.Annotations) == 0 {
		pod.Annotations = nil
	}
	return pod, nil
}

// Manifest returns the manifest that the resource template of the DAG task named
// task in wt creates, for item index item of a withItems task (ignored otherwise),
// with every parameter at its default and uid as the workflow's uid. Besides
// simple tags it evaluates the expression tags the argo target writes:
// toJson(workflow.parameters['NAME']), toJson(inputs.parameters['NAME']) and
// sprig.trunc(N, workflow.uid).
func Manifest(wt *wfv1.WorkflowTemplate, task string, item int, uid string) (string, error) {
	spec := &wt.Spec
	t, tmpl, err := taskTemplate(spec, task)
	if err != nil {
		return "", err
	}
	if tmpl.Resource == nil {
		return "", fmt.Errorf("task %q: template %q is not a resource template", task, t.Template)
	}
	tmpl = tmpl.DeepCopy() // templateDefaults of a container do not apply to a resource template
	params, err := taskParams(spec, t, tmpl, item)
	if err != nil {
		return "", err
	}
	params["workflow.uid"] = uid
	if err := substituteJSON(tmpl, params); err != nil {
		return "", err
	}
	return tmpl.Resource.Manifest, nil
}

// ManifestPods decodes manifest, refusing unknown fields, and returns the pod
// templates of the Jobs it holds: one per replicated job of a JobSet, one for a
// Job, none for another kind.
func ManifestPods(manifest string) ([]corev1.PodTemplateSpec, error) {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(manifest), &meta); err != nil {
		return nil, err
	}
	switch meta.APIVersion + " " + meta.Kind {
	case jobsetv1.SchemeGroupVersion.String() + " JobSet":
		var js jobsetv1.JobSet
		if err := yaml.UnmarshalStrict([]byte(manifest), &js); err != nil {
			return nil, err
		}
		var pods []corev1.PodTemplateSpec
		for _, rj := range js.Spec.ReplicatedJobs {
			pods = append(pods, rj.Template.Spec.Template)
		}
		return pods, nil
	case "batch/v1 Job":
		var j batchv1.Job
		if err := yaml.UnmarshalStrict([]byte(manifest), &j); err != nil {
			return nil, err
		}
		return []corev1.PodTemplateSpec{j.Spec.Template}, nil
	}
	return nil, nil
}

// taskTemplate returns the DAG task named task of spec's entrypoint and its
// template.
func taskTemplate(spec *wfv1.WorkflowSpec, task string) (*wfv1.DAGTask, *wfv1.Template, error) {
	entry := template(spec, spec.Entrypoint)
	if entry == nil || entry.DAG == nil {
		return nil, nil, fmt.Errorf("entrypoint %q is not a DAG template", spec.Entrypoint)
	}
	for i := range entry.DAG.Tasks {
		if t := &entry.DAG.Tasks[i]; t.Name == task {
			tmpl := template(spec, t.Template)
			if tmpl == nil {
				return nil, nil, fmt.Errorf("task %q: no template %q", task, t.Template)
			}
			return t, tmpl, nil
		}
	}
	return nil, nil, fmt.Errorf("no task %q", task)
}

// taskParams returns the parameters task t passes to tmpl: the workflow's, then
// the template's inputs from the task's arguments, each with {{item...}} taken from
// the task's item.
func taskParams(spec *wfv1.WorkflowSpec, t *wfv1.DAGTask, tmpl *wfv1.Template, item int) (map[string]string, error) {
	params := map[string]string{}
	for _, p := range spec.Arguments.Parameters {
		params["workflow.parameters."+p.Name] = p.Value.String()
	}
	itemParams := map[string]string{}
	if len(t.WithItems) > 0 {
		if item < 0 || item >= len(t.WithItems) {
			return nil, fmt.Errorf("task %q has %d items, not %d", t.Name, len(t.WithItems), item+1)
		}
		var fields map[string]string
		if err := json.Unmarshal(t.WithItems[item].Value, &fields); err != nil {
			return nil, fmt.Errorf("task %q item %d: %v", t.Name, item, err)
		}
		for k, v := range fields {
			itemParams["item."+k] = v
		}
	}
	for _, in := range tmpl.Inputs.Parameters {
		arg := t.Arguments.GetParameterByName(in.Name)
		if arg == nil || arg.Value == nil {
			return nil, fmt.Errorf("task %q passes no value for input %q", t.Name, in.Name)
		}
		params["inputs.parameters."+in.Name] = substitute(arg.Value.String(), itemParams)
	}
	return params, nil
}

func template(spec *wfv1.WorkflowSpec, name string) *wfv1.Template {
	for i := range spec.Templates {
		if spec.Templates[i].Name == name {
			return &spec.Templates[i]
		}
	}
	return nil
}

// withDefaults merges defaults under tmpl as the controller's
// mergedTemplateDefaultsInto does.
func withDefaults(tmpl, defaults *wfv1.Template) (*wfv1.Template, error) {
	out := tmpl.DeepCopy()
	if defaults == nil {
		return out, nil
	}
	d := defaults.DeepCopy()
	// Defaults of another template type do not apply.
	d.DAG, d.Steps, d.Script, d.Resource, d.Suspend, d.ContainerSet, d.Data, d.HTTP, d.Plugin = nil, nil, nil, nil, nil, nil, nil, nil, nil
	base, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	patch, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, patch, wfv1.Template{})
	if err != nil {
		return nil, fmt.Errorf("templateDefaults: %v", err)
	}
	out = &wfv1.Template{}
	if err := json.Unmarshal(merged, out); err != nil {
		return nil, err
	}
	return out, nil
}

// substituteJSON replaces {{name}} and {{=expression}} tags throughout tmpl, each
// value escaped as Argo escapes it for the JSON string it lands in (Escape),
// as Argo substitutes the template's JSON.
func substituteJSON(tmpl *wfv1.Template, params map[string]string) error {
	data, err := json.Marshal(tmpl)
	if err != nil {
		return err
	}
	var failed error
	out := replaceTags(string(data), func(tag string) (string, bool) {
		v, ok, err := value(tag, params)
		if err != nil {
			failed = err
		}
		if !ok {
			return "", false
		}
		return Escape(v), true
	})
	if failed != nil {
		return failed
	}
	*tmpl = wfv1.Template{}
	if err := json.Unmarshal([]byte(out), tmpl); err != nil {
		return fmt.Errorf("the substituted template is not JSON (as Argo's controller finds: \"result was invalid JSON\"): %v", err)
	}
	return nil
}

// Escape returns v as Argo's controller writes a value it substitutes into a
// template's JSON (util/template's simpleReplace): quoted as Go quotes it,
// without the quotes. What Go writes as \a, \v, \xXX or \UXXXXXXXX is not
// JSON.
func Escape(v string) string {
	q := strconv.Quote(v)
	return q[1 : len(q)-1]
}

// The expressions value evaluates.
var (
	toJSONExpr = regexp.MustCompile(`^toJson\((workflow|inputs)\.parameters\['([^']+)'\]\)$`)
	truncExpr  = regexp.MustCompile(`^sprig\.trunc\((\d+), ([a-z.]+)\)$`)
)

// value returns the value of a tag: a parameter, or one of the expressions the
// argo target writes (toJson quotes and escapes a string as JSON; sprig.trunc keeps
// its first characters).
func value(tag string, params map[string]string) (string, bool, error) {
	expr, ok := strings.CutPrefix(strings.TrimSpace(tag), "=")
	if !ok {
		v, ok := params[strings.TrimSpace(tag)]
		return v, ok, nil
	}
	if m := toJSONExpr.FindStringSubmatch(expr); m != nil {
		v, ok := params[m[1]+".parameters."+m[2]]
		if !ok {
			return "", false, fmt.Errorf("expression %q: no parameter %s.parameters.%s", expr, m[1], m[2])
		}
		q, err := json.Marshal(v)
		return string(q), true, err
	}
	if m := truncExpr.FindStringSubmatch(expr); m != nil {
		v, ok := params[m[2]]
		if !ok {
			return "", false, fmt.Errorf("expression %q: no variable %s", expr, m[2])
		}
		n, _ := strconv.Atoi(m[1])
		return v[:min(n, len(v))], true, nil
	}
	return "", false, fmt.Errorf("expression %q: argopod does not evaluate it", expr)
}

// substitute replaces each {{name}} tag of s whose name is in params.
func substitute(s string, params map[string]string) string {
	return replaceTags(s, func(tag string) (string, bool) {
		v, ok := params[strings.TrimSpace(tag)]
		return v, ok
	})
}

// replaceTags replaces each {{tag}} of s for which resolve returns a value.
func replaceTags(s string, resolve func(tag string) (string, bool)) string {
	var b strings.Builder
	for {
		start := strings.Index(s, "{{")
		if start < 0 {
			break
		}
		end := strings.Index(s[start:], "}}")
		if end < 0 {
			break
		}
		tag := s[start+2 : start+end]
		b.WriteString(s[:start])
		if v, ok := resolve(tag); ok {
			b.WriteString(v)
		} else {
			b.WriteString(s[start : start+end+2])
		}
		s = s[start+end+2:]
	}
	b.WriteString(s)
	return b.String()
}

func patchSpec(spec *corev1.PodSpec, patch string) error {
	base, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	merged, err := strategicpatch.StrategicMergePatch(base, []byte(patch), corev1.PodSpec{})
	if err != nil {
		return fmt.Errorf("podSpecPatch %q: %v", patch, err)
	}
	*spec = corev1.PodSpec{}
	return json.Unmarshal(merged, spec)
}

// first returns a when it is set, else b.
func first[T any](a, b T) T {
	data, _ := json.Marshal(a)
	switch string(data) {
	case `""`, "null", "{}", "[]":
		return b
	}
	return a
}

func hasVolume(vols []corev1.Volume, name string) bool {
	for _, v := range vols {
		if v.Name == name {
			return true
		}
	}
	return false
}

// Untraced is the comparison option under which Argo's (or Airflow's) pod of an
// untraced run is the Job target's: it leaves out the empty TRACEPARENT that
// every container of an Argo or Airflow step has (argo.ParamTraceParent's
// default, the DAG run's conf without it), and that the Job target's pods lack,
// the kube runtime setting it on each object it creates.
// The argo package's TestTraceParent checks the variable itself.
var Untraced cmp.Option = cmpopts.AcyclicTransformer("untraced", func(env []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range env {
		if e != (corev1.EnvVar{Name: plan.EnvTraceParent}) {
			out = append(out, e)
		}
	}
	return out
})

// RunIDs checks, then blanks, MANIFOLD_RUN_ID in the Job target's pod job and
// Argo's pod wf of one step: by that value alone the pods of a flow with an
// artifact store differ, the compiled Job's being plan.DefaultRunID and Argo's
// the workflow's name (the one a multi-node step's manifest holds, once Argo has
// substituted it, too).
func RunIDs(t testing.TB, what string, job, wf *corev1.PodTemplateSpec) {
	t.Helper()
	for _, side := range []struct {
		pod  *corev1.PodTemplateSpec
		want string
	}{{job, plan.DefaultRunID}, {wf, argo.RunID}} {
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
