// Package airflow emits a flow as an Airflow 3 DAG of KubernetesPodOperator tasks
// (<flow>.py), and the same operator arguments as plain JSON (<flow>.kpo.json) for
// teams that write their own DAGs. Both files are written from one DAG value.
//
// A multi-node step is a KubernetesJobOperator task that runs an Indexed Job, one
// pod per node, between a setup task that creates the headless Service its nodes
// find rank 0 through and a teardown task that deletes it.
//
// Each task runs its step's pod from the shared builder (emit.Pod), passed through
// the operator's own arguments (image, cmds, env_vars, container_resources,
// tolerations, ...), so Airflow builds exactly that pod. A pod field with no
// operator argument is an error, never a silent drop. A foreach step is one mapped
// task: KubernetesPodOperator.partial(...).expand(env_vars=[...]), one environment
// per item. Flow params are DAG params and reach the pod through Airflow
// templating; every other value reaches it literally.
//
// A dynamic flow (sdk.ForeachOf, sdk.When) adds gates, PythonOperator tasks
// of its own: a step whose values a later step reads pushes them to XCom
// (its Run body writes ValuesFile, which the operator's sidecar reads); a
// fan-out over one is mapped over the XCom of its items task
// (<step>_items), each item's environment filled in where Airflow renders
// nothing; a branch is a <step>_when task that skips itself, and so its
// step, when the value differs. Every task that waits for another does so
// with TriggerRule, so that a join waits only for the branch taken and a
// fan-out over no item counts as done.
package airflow

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// OnFinishAction is what the operator does with a pod that has finished: delete it
// when it succeeded, keep it when it failed so its logs and events stay readable.
const OnFinishAction = "delete_succeeded_pod"

// Without sdk.RetryBackoff, retries wait as Kubernetes makes a Job's retries wait:
// 10 seconds, doubling, at most 6 minutes, so the job and airflow targets agree.
const (
	retryDelay      = 10 * time.Second
	retryMultiplier = 2.0
	maxRetryDelay   = 6 * time.Minute
)

// Target is the airflow target.
type Target struct{}

var _ emit.Target = Target{}

// Name returns "airflow".
func (Target) Name() string { return "airflow" }

// Outputs names the files Emit may write for flow: see emit.Target.
func (Target) Outputs(flow string) []string {
	return []string{flow + ".py", flow + ".kpo.json", flow + emit.ClaimsFileSuffix}
}

// Emit writes <flow>.py and <flow>.kpo.json, and <flow>.claims.yaml
// (emit.ClaimsFile) when a step has DRA devices.
func (Target) Emit(f *plan.Flow, create emit.Create) field.ErrorList {
	errs, err := emitFiles(f, create)
	if len(errs) > 0 {
		return errs
	}
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return emit.ClaimsFile(create, f)
}

// emitFiles writes <flow>.py and <flow>.kpo.json, a step at a time: each
// step's tasks are made, printed and encoded, then let go. The DAG file's
// imports, which come first, are those of what its tasks use, so the text
// of its tasks, and the tasks of the .kpo.json file, are put aside in
// temporary files until every step's are made; their order, at the DAG file's
// end, needs only each task's name and upstream tasks.
func emitFiles(f *plan.Flow, create emit.Create) (field.ErrorList, error) {
	var temps []*os.File
	defer func() {
		for _, t := range temps {
			t.Close()
			os.Remove(t.Name())
		}
	}()
	temp := func() (*os.File, *bufio.Writer, error) {
		t, err := os.CreateTemp("", "manifold-airflow-")
		if err != nil {
			return nil, nil, err
		}
		temps = append(temps, t)
		return t, bufio.NewWriterSize(t, 64<<10), nil
	}
	pyTemp, pyBuf, err := temp()
	if err != nil {
		return nil, err
	}
	kpoTemp, kpoBuf, err := temp()
	if err != nil {
		return nil, err
	}
	d := &DAG{ID: f.Name, Schedule: f.Schedule, Params: f.Params}
	p := newPrinter(pyBuf)
	p.dag(d)
	k := &kpoWriter{w: kpoBuf}
	var orders []Task // each task's ID, Upstream and Setups only: what edges writes
	var errs field.ErrorList
	for i := range f.Steps {
		tasks, e := stepTasks(f, &f.Steps[i])
		if e != nil {
			errs = append(errs, e)
			continue
		}
		if len(errs) > 0 {
			continue // nothing is written: find the other steps' errors
		}
		for j := range tasks {
			t := &tasks[j]
			p.task(t)
			if err := k.write(t); err != nil {
				return nil, err
			}
			orders = append(orders, Task{ID: t.ID, Upstream: t.Upstream, Setups: t.Setups})
		}
	}
	if len(errs) > 0 {
		return errs, nil
	}
	for i := range orders {
		p.edges(&orders[i])
	}
	if err := errors.Join(pyBuf.Flush(), kpoBuf.Flush()); err != nil {
		return nil, err
	}
	w, err := create(f.Name + ".py")
	if err != nil {
		return nil, err
	}
	if err := p.writeTo(w, d.ID, pyTemp); err != nil {
		return nil, err
	}
	head, err := d.kpoHead()
	if err != nil {
		return nil, err
	}
	if w, err = create(f.Name + ".kpo.json"); err != nil {
		return nil, err
	}
	return nil, writeKPO(w, head, k.n, func(w io.Writer) error {
		if _, err := kpoTemp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		_, err := io.Copy(w, kpoTemp)
		return err
	})
}

// DAG is a flow as Airflow runs it; Python and JSON write it out.
type DAG struct {
	ID string
	// Schedule is a cron expression, "" for none.
	Schedule string
	Params   []plan.Param
	// Tasks are in the flow's dependency order.
	Tasks []Task
}

// Task is one operator task.
type Task struct {
	ID       string
	Upstream []string
	// Operator is the operator's class, a key of Operators: KubernetesPodOperator
	// for a step, KubernetesJobOperator for a multi-node step, and the resource
	// operators for the Service of a multi-node step.
	Operator string
	// Args are the operator's arguments, in the order they are written.
	Args []Arg
	// Items holds a foreach step's environment for each item: the task is mapped
	// over them (expand(env_vars=Items)), and Args then has no env_vars.
	Items [][]corev1.EnvVar
	// Templates names the variables whose values are Airflow templates: the flow
	// params' (ParamRef), TRACEPARENT's (TraceParent), the run ID's (RunID) and
	// a multi-node step's rank 0 addresses. Every other value is literal. Users
	// cannot name their own variables so (compile refuses MANIFOLD_ names, and
	// the rendezvous names on a multi-node step).
	Templates map[string]bool
	// Setup marks the task that creates what its step's task needs; Setups, on a
	// teardown task, names the setup tasks whose work it undoes once its upstream
	// is done, whatever became of it (Airflow's as_teardown).
	Setup  bool
	Setups []string
	// Gate, on a task of Manifold's own (Operator PythonOperator), says what
	// it does; the task runs no pod.
	Gate *Gate
	// ItemsFrom, on a step that fans out over a value found at run time
	// (sdk.ForeachOf), names the items task (a Gate of kind GateItems) whose
	// items the task is mapped over; ItemEnv is then the pod's environment,
	// in which each item fills in MANIFOLD_ITEM, MANIFOLD_INDEX and
	// MANIFOLD_COUNT (ItemPlaceholder), and the templates of Templates with
	// what the items task rendered; Args then has no env_vars.
	ItemsFrom string
	ItemEnv   []corev1.EnvVar
}

// Template is an argument value that Airflow renders: written as it is, where any
// other string that Airflow would render is wrapped in literal().
type Template string

// Operators maps each operator class the target uses to its module.
var Operators = map[string]string{
	PodOperator:            "airflow.providers.cncf.kubernetes.operators.pod",
	PythonOperator:         "airflow.providers.standard.operators.python",
	JobOperator:            "airflow.providers.cncf.kubernetes.operators.job",
	CreateResourceOperator: "airflow.providers.cncf.kubernetes.operators.resource",
	DeleteResourceOperator: "airflow.providers.cncf.kubernetes.operators.resource",
}

// The operator classes of the target.
const (
	// PodOperator runs a step's pod.
	PodOperator = "KubernetesPodOperator"
	// JobOperator runs a multi-node step's Indexed Job.
	JobOperator = "KubernetesJobOperator"
	// CreateResourceOperator and DeleteResourceOperator create and delete a
	// multi-node step's Service.
	CreateResourceOperator = "KubernetesCreateResourceOperator"
	DeleteResourceOperator = "KubernetesDeleteResourceOperator"
	// PythonOperator runs the gates of a dynamic flow (Task.Gate).
	PythonOperator = "PythonOperator"
)

// podNameSuffix is what the operator appends to a pod's name: "-" and 8 random
// characters, within Kubernetes' 63.
const podNameSuffix = 9

// PodName is the name the operator gives step s's pods before its random suffix,
// short enough that the suffix never cuts it (and with it the hash that keeps long
// names apart).
func PodName(f *plan.Flow, s *plan.Step) string {
	return emit.Name(emit.MaxNameLength-podNameSuffix, f.Name, s.Name)
}

// Arg is one operator argument: its Python keyword and its value (a string, int,
// time.Duration, map[string]string, or a core/v1 value or slice of them).
type Arg struct {
	Name  string
	Value any
}

// ParamRef is the Airflow template of flow param p's value. It indexes params
// rather than naming an attribute: names may hold '-', and Jinja would resolve
// params.items or params.keys to the mapping's methods.
func ParamRef(p plan.Param) string {
	return "{{ params['" + p.Name + "'] }}"
}

// RunID is the template of the DAG run's id, the run ID of a step's pod
// (MANIFOLD_RUN_ID, with an artifact store): every task of a run renders it alike.
const RunID = "{{ run_id }}"

// ConfTraceParent is the reserved key of a DAG run's conf whose value every
// step's pod gets as TRACEPARENT (plan.EnvTraceParent): a traced trigger sets it
// to the trace context of the run's span, so the steps continue the run's
// trace. A run without it (untraced, scheduled, or started from Airflow's UI)
// gives an empty TRACEPARENT. It begins with "_", which a flow's param cannot.
const ConfTraceParent = "_manifold_traceparent"

// TraceParent is the template of a step's TRACEPARENT: ConfTraceParent of the
// run's conf, "" when the conf has none.
const TraceParent = "{{ (dag_run.conf or {}).get('" + ConfTraceParent + "', '') }}"

// Build turns f into the DAG, held whole, that WritePython and WriteJSON
// write; Emit writes the same files a step at a time (emitFiles).
func Build(f *plan.Flow) (*DAG, field.ErrorList) {
	d := &DAG{ID: f.Name, Schedule: f.Schedule, Params: f.Params}
	var errs field.ErrorList
	for i := range f.Steps {
		tasks, err := stepTasks(f, &f.Steps[i])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.Tasks = append(d.Tasks, tasks...)
	}
	return d, errs
}

// stepTasks returns the tasks of step s: in a dynamic flow, with the gates
// before them that its sdk.When and sdk.ForeachOf need (dynamicTasks).
func stepTasks(f *plan.Flow, s *plan.Step) ([]Task, *field.Error) {
	var tasks []Task
	var err error
	if s.Nodes > 1 {
		tasks, err = multiNode(f, s)
	} else {
		var t Task
		o := emit.PodOptions{Param: ParamRef, RunID: RunID, TraceParent: TraceParent, Values: len(f.Published(s.Name)) > 0}
		t, err = task(f, s, PodOperator, o, nil)
		tasks = []Task{t}
	}
	if err != nil {
		return nil, field.InternalError(field.NewPath("steps").Key(s.Name), err)
	}
	if f.Dynamic() == nil {
		return tasks, nil
	}
	return dynamicTasks(f, s, tasks)
}

// task returns the operator task that runs step s's pod, built with o; for a
// foreach step, itemOptions gives each item's options (nil: o with the item).
func task(f *plan.Flow, s *plan.Step, operator string, o emit.PodOptions, itemOptions func(i int) emit.PodOptions) (Task, error) {
	t := Task{ID: s.Name, Upstream: s.After, Operator: operator, Templates: map[string]bool{}}
	for _, p := range f.Params {
		t.Templates[p.Env] = true
	}
	if o.TraceParent != "" {
		t.Templates[plan.EnvTraceParent] = true
	}
	if f.Artifacts != nil {
		t.Templates[plan.EnvRunID] = true
	}
	if s.ForeachOf != nil {
		// Each item fills in its variables (ItemEnv), mapped at run time.
		o.Item = dynamicItem
		pod := queued(f, s, o)
		if err := paramsFirst(f, pod); err != nil {
			return t, err
		}
		t.ItemEnv = pod.Spec.Containers[0].Env
		args, err := operatorArgs(f, s, pod, false)
		t.Args = args
		return t, err
	}
	if s.Foreach == nil {
		pod := queued(f, s, o)
		if err := paramsFirst(f, pod); err != nil {
			return t, err
		}
		if o.Values {
			c := &pod.Spec.Containers[0]
			c.Env = append(c.Env, publishedEnv())
		}
		args, err := operatorArgs(f, s, pod, true)
		t.Args = args
		return t, err
	}
	// Items differ only in their environment: the pod of item 0 without it gives
	// the operator's partial arguments, and every item's pod must agree.
	var first corev1.PodTemplateSpec
	for i := range s.Foreach {
		io := o
		io.Item = emit.ItemAt(s, i)
		if itemOptions != nil {
			io = itemOptions(i)
		}
		pod := queued(f, s, io)
		if err := paramsFirst(f, pod); err != nil {
			return t, err
		}
		t.Items = append(t.Items, pod.Spec.Containers[0].Env)
		pod.Spec.Containers[0].Env = nil
		if i == 0 {
			first = pod
		} else if !reflect.DeepEqual(first, pod) {
			return t, fmt.Errorf("foreach item %d's pod differs from item 0's in more than its environment", i)
		}
	}
	args, err := operatorArgs(f, s, first, false)
	t.Args = args
	return t, err
}

// queued returns step s's pod, built with o, with the labels by which Kueue
// admits the object the operator creates: the pod itself (KubernetesPodOperator,
// through Kueue's pod integration) or its Job (KubernetesJobOperator, which gives
// the Job its pod's labels; Kueue's pod webhook leaves the pods of a Job it
// manages to the Job).
func queued(f *plan.Flow, s *plan.Step, o emit.PodOptions) corev1.PodTemplateSpec {
	pod := emit.Pod(f, s, o)
	pod.Labels = emit.Queued(pod.Labels, s)
	return pod
}

// paramsFirst checks that the pod's single container starts its environment with
// the flow params' templates (emit.Env puts them first), which Task.Templates names.
func paramsFirst(f *plan.Flow, pod corev1.PodTemplateSpec) error {
	if len(pod.Spec.Containers) != 1 {
		return fmt.Errorf("the pod has %d containers; a KubernetesPodOperator runs one", len(pod.Spec.Containers))
	}
	env := pod.Spec.Containers[0].Env
	for i, p := range f.Params {
		if i >= len(env) || env[i] != (corev1.EnvVar{Name: p.Env, Value: ParamRef(p)}) {
			return fmt.Errorf("the pod's environment does not start with flow param %s", p.Name)
		}
	}
	return nil
}

// operatorArgs passes pod through KubernetesPodOperator's arguments, and adds the
// task's own (retries, timeouts). Every field it reads is cleared from a copy of
// the pod; a field left over has no argument, and is an error rather than a pod
// that silently differs from the other targets'.
func operatorArgs(f *plan.Flow, s *plan.Step, pod corev1.PodTemplateSpec, withEnv bool) ([]Arg, error) {
	rest := *pod.DeepCopy()
	if len(rest.Spec.Containers) != 1 {
		return nil, fmt.Errorf("the pod has %d containers; a KubernetesPodOperator runs one", len(rest.Spec.Containers))
	}
	c := rest.Spec.Containers[0]
	rest.Spec.Containers = nil

	var args []Arg
	add := func(name string, v any) {
		if !reflect.ValueOf(v).IsZero() {
			args = append(args, Arg{name, v})
		}
	}
	add("task_id", s.Name)
	add("name", PodName(f, s))
	add("namespace", s.Namespace)
	add("image", take(&c.Image))
	add("image_pull_policy", string(take(&c.ImagePullPolicy)))
	add("cmds", take(&c.Command))
	add("arguments", take(&c.Args))
	env := take(&c.Env)
	if withEnv {
		add("env_vars", env)
	}
	add("env_from", take(&c.EnvFrom))
	add("ports", take(&c.Ports))
	add("container_resources", take(&c.Resources))
	add("volume_mounts", take(&c.VolumeMounts))
	add("container_security_context", take(&c.SecurityContext))
	// The operator reads the logs of its base container, "base" unless named.
	add("base_container_name", take(&c.Name))
	add("labels", take(&rest.Labels))
	add("annotations", take(&rest.Annotations))
	add("node_selector", take(&rest.Spec.NodeSelector))
	add("tolerations", take(&rest.Spec.Tolerations))
	add("affinity", take(&rest.Spec.Affinity))
	add("volumes", take(&rest.Spec.Volumes))
	add("service_account_name", take(&rest.Spec.ServiceAccountName))
	add("priority_class_name", take(&rest.Spec.PriorityClassName))
	add("image_pull_secrets", take(&rest.Spec.ImagePullSecrets))
	add("security_context", take(&rest.Spec.SecurityContext))
	add("active_deadline_seconds", take(&rest.Spec.ActiveDeadlineSeconds))
	add("hostnetwork", take(&rest.Spec.HostNetwork))
	add("dnspolicy", string(take(&rest.Spec.DNSPolicy)))
	// The pod's DRA claims have no argument of their own: the operator merges
	// full_pod_spec under the pod it builds.
	if claims := take(&rest.Spec.ResourceClaims); len(claims) > 0 {
		add("full_pod_spec", &corev1.Pod{Spec: corev1.PodSpec{
			Containers:     []corev1.Container{{Name: plan.ContainerName}},
			ResourceClaims: claims,
		}})
	}
	if rest.Spec.RestartPolicy == corev1.RestartPolicyNever {
		rest.Spec.RestartPolicy = "" // the operator's pods never restart
	}
	if !reflect.ValueOf(c).IsZero() {
		return nil, leftover("container", c)
	}
	if !reflect.ValueOf(rest).IsZero() {
		return nil, leftover("pod", rest)
	}

	args = append(args, Arg{"retries", s.Retry})
	if s.Retry > 0 {
		if s.RetryBackoff > 0 {
			args = append(args, Arg{"retry_delay", s.RetryBackoff})
		} else {
			args = append(args, Arg{"retry_delay", retryDelay}, Arg{"retry_exponential_backoff", retryMultiplier}, Arg{"max_retry_delay", maxRetryDelay})
		}
	}
	add("execution_timeout", s.Timeout)
	args = append(args, Arg{"on_finish_action", OnFinishAction})
	return args, nil
}

// take returns *p and clears it.
func take[T any](p *T) T {
	v := *p
	var zero T
	*p = zero
	return v
}

func leftover(what string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fmt.Errorf("%s fields %s have no KubernetesPodOperator argument; the airflow target would drop them", what, strings.TrimSpace(string(data)))
}
