package airflow

import (
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// The tasks of Manifold's own that a dynamic flow's DAG adds before a step:
// a task id is the step's name and the suffix, which no step's name can hold.
const (
	// ItemsTaskSuffix ends the id of the task that reads the items of a
	// step's fan-out (sdk.ForeachOf) from the producing task's XCom.
	ItemsTaskSuffix = "_items"
	// WhenTaskSuffix ends the id of the task that decides whether a step of
	// sdk.When runs: it skips itself, and so the step, when it does not.
	WhenTaskSuffix = "_when"
)

// ValuesFile is where a step whose values a later step reads
// (plan.Flow.Published) writes them all, one JSON object
// (plan.EnvValuesFile): the file KubernetesPodOperator's XCom sidecar reads
// once the step's container has ended, and pushes as the task's XCom.
const ValuesFile = "/airflow/xcom/return.json"

// TriggerRule is the trigger rule of every task that waits for another in
// a dynamic flow: a task runs once none of those it waits for failed and one
// succeeded, so a join after a branch waits only for the branch taken, a
// task that waits only for skipped tasks (a branch not taken) is skipped,
// and a failure stops what waits for it.
const TriggerRule = "none_failed_min_one_success"

// ItemPlaceholder is the value of MANIFOLD_ITEM, MANIFOLD_INDEX and
// MANIFOLD_COUNT in the environment a fan-out over a run-time value is
// mapped with (Task.ItemEnv): each item fills in its own.
const ItemPlaceholder = "<each item's>"

// The kinds of Gate.
const (
	// GateItems reads the items of a fan-out.
	GateItems = "items"
	// GateWhen decides a branch.
	GateWhen = "when"
)

// Gate is what a task of Manifold's own does (a PythonOperator in the DAG
// file, which runs no pod): read the items of a fan-out over a value a step
// published, or decide whether a step of sdk.When runs.
type Gate struct {
	// Kind is GateItems or GateWhen.
	Kind string `json:"kind"`
	// Step is the step the gate is for.
	Step string `json:"step"`
	// Producer is the step that published the value, in its task's XCom
	// (ValuesFile); Name is the value's name.
	Producer string `json:"producer"`
	Name     string `json:"name"`
	// Want, for GateWhen, is the value the step runs on, in the canonical
	// JSON of the values file's "canonical".
	Want string `json:"want,omitempty"`
	// Templates, for GateItems, are the variables of the step's pod whose
	// values are Airflow templates, and those templates: the gate renders
	// them, once for every item, where the items' environments cannot be.
	Templates map[string]string `json:"templates,omitempty"`
}

// upstreamOf returns the tasks a task that waits for the steps after waits
// for, in a dynamic flow: each step's task, and for a fan-out over a
// run-time value its items task too, which succeeds when the fan-out has no
// item (its mapped task is then skipped).
func upstreamOf(f *plan.Flow, after []string) []string {
	var up []string
	for _, a := range after {
		up = append(up, a)
		if s := f.Step(a); s != nil && s.ForeachOf != nil {
			up = append(up, a+ItemsTaskSuffix)
		}
	}
	return up
}

// dynamicTasks returns the tasks of step s of dynamic flow f, tasks, with
// the gates it needs before them, each task that waits for s's dependencies
// waiting for them through the gates with TriggerRule.
func dynamicTasks(f *plan.Flow, s *plan.Step, tasks []Task) ([]Task, *field.Error) {
	if err := checkDynamicStep(f, s); err != nil {
		return nil, err
	}
	up := upstreamOf(f, s.After)
	var gates []Task
	if w := s.When; w != nil {
		want, err := canonical(w.Value)
		if err != nil {
			return nil, field.Invalid(field.NewPath("steps").Key(s.Name).Child("when", "value"), w.Value, err.Error())
		}
		g := gateTask(s.Name+WhenTaskSuffix, up, &Gate{Kind: GateWhen, Step: s.Name, Producer: w.Ref.Step, Name: w.Ref.Name, Want: want})
		gates, up = append(gates, g), []string{g.ID}
	}
	if ref := s.ForeachOf; ref != nil {
		g := gateTask(s.Name+ItemsTaskSuffix, up, &Gate{Kind: GateItems, Step: s.Name, Producer: ref.Step, Name: ref.Name, Templates: itemTemplates(&tasks[0])})
		gates, up = append(gates, g), []string{g.ID}
		tasks[0].ItemsFrom = g.ID
	}
	for i := range tasks {
		t := &tasks[i]
		if !slices.Equal(t.Upstream, s.After) || len(up) == 0 {
			continue
		}
		t.Upstream = up
		t.Args = append(t.Args, Arg{"trigger_rule", TriggerRule})
	}
	if len(f.Published(s.Name)) > 0 {
		t := &tasks[0]
		t.Args = append(t.Args, Arg{"do_xcom_push", true}, Arg{"xcom_sidecar_container_security_context", sidecarSecurity(t.Args)})
	}
	return append(gates, tasks...), nil
}

// nobody is the user the XCom sidecar runs as when the step's pod names
// none: the pod runs as non-root, and the sidecar's image would run as root.
const nobody = 65534

// sidecarSecurity returns the security context of the XCom sidecar of a
// task of args: its step container's, run as the pod's user, or as nobody
// when the pod names none.
func sidecarSecurity(args []Arg) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{}
	var pod *corev1.PodSecurityContext
	for _, a := range args {
		switch v := a.Value.(type) {
		case *corev1.SecurityContext:
			if a.Name == "container_security_context" {
				sc = v.DeepCopy()
			}
		case *corev1.PodSecurityContext:
			pod = v
		}
	}
	if sc.RunAsUser == nil && (pod == nil || pod.RunAsUser == nil) {
		sc.RunAsUser = new(int64(nobody))
	}
	return sc
}

// checkDynamicStep refuses what the target cannot run of a dynamic flow's
// step s, naming the step and the option.
func checkDynamicStep(f *plan.Flow, s *plan.Step) *field.Error {
	at := field.NewPath("steps").Key(s.Name)
	published := f.Published(s.Name)
	switch {
	case s.Nodes > 1 && s.ForeachOf != nil:
		return field.Forbidden(at.Child("foreachOf"), "the airflow target runs a multi-node step as one Job: it cannot fan one out over a value found at run time; fan out a step of one node, or join the items first")
	case s.Nodes > 1 && s.When != nil:
		return field.Forbidden(at.Child("when"), "the airflow target cannot branch on a value before a multi-node step; put sdk.When on a step of one node before it, and make this step wait for that one")
	case len(published) > 0 && s.Nodes > 1:
		return field.Forbidden(at.Child("nodes"), fmt.Sprintf("on the airflow target, the value %s that a later step reads must come from a step of one node, whose pod gives it to Airflow's XCom", published[0]))
	case len(published) > 0 && s.Body != plan.BodyRun:
		return field.Forbidden(at.Child("command"), fmt.Sprintf("on the airflow target, the value %s that a later step reads must come from a Run step, which gives it to Airflow's XCom (%s); make %s a Run step that puts it", published[0], plan.EnvValuesFile, s.Name))
	}
	return nil
}

// gateTask returns the task of gate g, id, waiting for up.
func gateTask(id string, up []string, g *Gate) Task {
	t := Task{ID: id, Upstream: up, Operator: PythonOperator, Gate: g, Args: []Arg{{"task_id", id}}}
	if len(up) > 0 {
		t.Args = append(t.Args, Arg{"trigger_rule", TriggerRule})
	}
	return t
}

// itemTemplates returns the variables of the environment t is mapped with
// whose values are templates, with those values.
func itemTemplates(t *Task) map[string]string {
	m := map[string]string{}
	for _, e := range t.ItemEnv {
		if t.Templates[e.Name] {
			m[e.Name] = e.Value
		}
	}
	return m
}

// dynamicItem is the item of the pod of a fan-out over a run-time value: its
// variables, filled in for each item (ItemPlaceholder).
var dynamicItem = &emit.Item{Value: ItemPlaceholder, Index: ItemPlaceholder, Count: ItemPlaceholder}

// canonical returns JSON text as decoded and encoded again, the form in
// which the values file holds each value's "canonical" (what sdk.When
// compares, decoded JSON).
func canonical(text string) (string, error) {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// publishedEnv is the variable through which a step whose values a later
// step reads writes them for the XCom sidecar.
func publishedEnv() corev1.EnvVar {
	return corev1.EnvVar{Name: plan.EnvValuesFile, Value: ValuesFile}
}
