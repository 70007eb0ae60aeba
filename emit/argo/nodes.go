package argo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/plan"
)

// RunToken is what a multi-node step's object names end with: an expression Argo
// replaces, when it runs the step, with the first RunTokenLength characters of the
// workflow's uid. Two runs of the flow (or a run and the one before it, still being
// cleaned up) never share an object name.
const RunToken = "{{=sprig.trunc(8, workflow.uid)}}"

// RunTokenLength is how many characters RunToken becomes.
const RunTokenLength = 8

// ServiceSuffix ends the names of the template and task that create the headless
// Service of a multi-node step run as an Indexed Job. Step names are DNS-1123
// labels, which never end with "-", so the suffix never makes a name another
// step's; it is lowercase because Argo puts a template's name into the name of its
// pod, which must be a DNS-1123 subdomain.
const ServiceSuffix = "-service-"

// The conditions Argo's executor waits for on the object a multi-node step
// creates. They are label selectors whose keys are gjson paths into the object
// (workflow/executor/resource.go): failure requirements are tried one by one, and
// all success requirements must hold.
const (
	// JobSet v0.12 sets status.terminalState once the JobSet has completed, or
	// failed for good (after failurePolicy.maxRestarts).
	JobSetSuccess = "status.terminalState == Completed"
	JobSetFailure = "status.terminalState == Failed"
	// A Job's completionTime is set only when it has succeeded. A selector cannot
	// look conditions up by type, so failure is read by position: FailureTarget
	// (then Failed) is the Job's first condition, or its second after a Suspended
	// condition that a queueing controller added.
	JobSuccess = "status.completionTime"
	JobFailure = "status.conditions.0.type in (Failed,FailureTarget),status.conditions.1.type in (Failed,FailureTarget)"
)

// jobGrace is how long after its own deadline an Indexed Job may take to reach a
// condition (its pods stopping) before the template's deadline fails the step.
const jobGrace = 5 * time.Minute

// multiNode returns the templates and DAG tasks that run multi-node step s: a
// resource template creating its JobSet, or, with argo_multi_node = "job", one
// creating its headless Service and one creating its Indexed Job, the Job's task
// after the Service's.
//
// A resource template is not retried: a retry would create an object of the same
// name, which exists. The nodes are retried by the object itself (the JobSet's
// failurePolicy.maxRestarts, the Job's backoffLimitPerIndex).
func multiNode(f *plan.Flow, s *plan.Step, literal bool, runID string) ([]wfv1.Template, []wfv1.DAGTask, error) {
	o := PodOptions(s)
	o.RunID = runID
	if f.ArgoMultiNode != plan.ArgoJob {
		// One JobSet holds every foreach item, each a replicated job.
		o.Item = nil
		js := jobset.Build(f, s, runName(jobset.MaxName(s), f, s, ""), o)
		if literal {
			for i := range js.Spec.ReplicatedJobs {
				withBraces(f.Name, &js.Spec.ReplicatedJobs[i].Template.Spec.Template.Spec)
			}
		}
		m, err := manifest(f, js)
		if err != nil {
			return nil, nil, err
		}
		tks, err := multiNodeTasks(f, s)
		if err != nil {
			return nil, nil, err
		}
		return []wfv1.Template{resourceTemplate(s.Name, m, JobSetSuccess, JobSetFailure)}, tks, nil
	}

	// One Service and Job per foreach item, through withItems; the item's index
	// is in their names, before the token.
	max, index := job.MaxName(s), ""
	if s.Foreach != nil {
		index = "-" + o.Item.Index
		max -= len("-" + strconv.Itoa(len(s.Foreach)-1)) // the longest index Argo puts there
	}
	j := job.New(f, s, runName(max, f, s, index), o)
	if literal {
		withBraces(f.Name, &j.Spec.Template.Spec)
	}
	jm, err := manifest(f, j)
	if err != nil {
		return nil, nil, err
	}
	sm, err := manifest(f, job.Service(j))
	if err != nil {
		return nil, nil, err
	}
	jt := resourceTemplate(s.Name, jm, JobSuccess, JobFailure)
	if d := j.Spec.ActiveDeadlineSeconds; d != nil {
		jt.ActiveDeadlineSeconds = deadline(*d + emit.Seconds(jobGrace))
	}
	st := resourceTemplate(s.Name+ServiceSuffix, sm, "", "")
	if s.Foreach != nil {
		jt.Inputs.Parameters = []wfv1.Parameter{{Name: InputItem}, {Name: InputIndex}}
		st.Inputs.Parameters = jt.Inputs.Parameters
	}
	tks, err := multiNodeTasks(f, s)
	if err != nil {
		return nil, nil, err
	}
	return []wfv1.Template{st, jt}, tks, nil
}

// multiNodeTasks returns the DAG tasks of multiNode's templates: the
// JobSet's, or the Service's and then the Job's.
func multiNodeTasks(f *plan.Flow, s *plan.Step) ([]wfv1.DAGTask, error) {
	tk, err := task(s)
	if err != nil {
		return nil, err
	}
	if f.ArgoMultiNode != plan.ArgoJob {
		tk.WithItems, tk.Arguments = nil, wfv1.Arguments{}
		return []wfv1.DAGTask{tk}, nil
	}
	svcTask, jobTask := tk, tk
	svcTask.Name, svcTask.Template = TaskName(s.Name)+ServiceSuffix, s.Name+ServiceSuffix
	jobTask.Depends = svcTask.Name
	return []wfv1.DAGTask{svcTask, jobTask}, nil
}

// runName names an object that a run of step s creates: the flow's and step's
// names shortened as emit.Name shortens them, then suffix, then RunToken, in at
// most max characters once Argo has replaced the token (and any tag in suffix,
// which max leaves room for).
func runName(max int, f *plan.Flow, s *plan.Step, suffix string) string {
	return emit.Name(max-len("-")-RunTokenLength, f.Name, s.Name) + suffix + "-" + RunToken
}

// resourceTemplate creates the object manifest holds, owned by the workflow so
// that deleting the workflow deletes it, and waits for the conditions.
func resourceTemplate(name, manifest, success, failure string) wfv1.Template {
	return wfv1.Template{Name: name, Resource: &wfv1.ResourceTemplate{
		Action:            "create",
		SetOwnerReference: true,
		Manifest:          manifest,
		SuccessCondition:  success,
		FailureCondition:  failure,
	}}
}

// manifest returns obj as the JSON manifest of a resource template: compact JSON
// on one line, which the YAML file shows as a literal block of that line (the
// most compact form an object takes there: indented YAML or JSON would repeat a
// block's indentation on every field's line). Argo
// substitutes a resource manifest as text, escaping a value only for the
// template's own JSON, so a param or item spliced in as it stands could end the
// manifest's string early. Each is read instead through toJson, which quotes and
// escapes it for the manifest: "{{workflow.parameters.p}}" becomes
// {{=toJson(workflow.parameters['p'])}}. (No other value holds "{{": see Carry.)
func manifest(f *plan.Flow, obj any) (string, error) {
	data, err := encode.JSON(obj, "")
	if err != nil {
		return "", err
	}
	m := yamlReadable(string(data)) + "\n"
	for _, p := range f.Params {
		m = strings.ReplaceAll(m, `"`+paramTag(p.Name)+`"`, "{{=toJson(workflow.parameters['"+p.Name+"'])}}")
	}
	return strings.ReplaceAll(m, `"{{inputs.parameters.`+InputItem+`}}"`, "{{=toJson(inputs.parameters['"+InputItem+"'])}}"), nil
}

// yamlReadable returns the JSON text js with each character that a YAML
// reader refuses in a document (DEL, and C1 controls but NEL: yaml.v2's
// reader, which Argo's validator reads a manifest with, takes only tab, line
// breaks, printable ASCII, NEL and the rest of Unicode but surrogates, U+FFFE
// and U+FFFF) written as a JSON escape, which reads back as the same
// character. Such a character is never part of JSON's syntax, so it is inside
// a string, where "\uXXXX" stands for it. (encoding/json already escapes C0
// controls.)
func yamlReadable(js string) string {
	refused := func(r rune) bool {
		return r == 0x7f || r >= 0x80 && r < 0xa0 && r != 0x85 || r == 0xfffe || r == 0xffff
	}
	if !strings.ContainsFunc(js, refused) {
		return js
	}
	var b strings.Builder
	for _, r := range js {
		if refused(r) {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// deadline is an activeDeadlineSeconds: an int where it fits, else a string.
func deadline(d int64) *intstr.IntOrString {
	if d <= 1<<31-1 {
		return new(intstr.FromInt32(int32(d)))
	}
	return new(intstr.FromString(strconv.FormatInt(d, 10)))
}
