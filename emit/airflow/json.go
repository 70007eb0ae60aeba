package airflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// KPOFile is the form of <flow>.kpo.json: the DAG's settings and each task's
// operator arguments. Kubernetes objects are in their API JSON form (what
// kubernetes.client's ApiClient().sanitize_for_serialization gives), durations are
// seconds. Every string is meant literally except the values of the
// MANIFOLD_PARAM_ variables, which are Airflow templates of the DAG's params, of
// MANIFOLD_RUN_ID (a flow with an artifact store), the template of the run's id, of
// TRACEPARENT, the template of the run's trace context (TraceParent), and,
// in the tasks of a multi-node step, the values of MASTER_ADDR, PET_MASTER_ADDR and
// NEURON_RT_ROOT_COMM_ID, the Job task's name, namespace, labels and
// pod_template_dict, and the Service tasks' yaml_conf: Airflow templates of the
// run's names (Manifold's names and labels never hold template syntax of their own).
type KPOFile struct {
	DAGID    string            `json:"dag_id"`
	Schedule *string           `json:"schedule"`
	Params   map[string]string `json:"params"`
	Tasks    []KPOTask         `json:"tasks"`
}

// KPOTask is one task of KPOFile.
type KPOTask struct {
	TaskID   string   `json:"task_id"`
	Upstream []string `json:"upstream"`
	// Operator is the operator's module and class.
	Operator string `json:"operator"`
	// Arguments are the operator's keyword arguments; for a mapped task, those of
	// partial().
	Arguments map[string]any `json:"arguments"`
	// Expand, for a foreach step, holds the mapped arguments: env_vars, one list
	// per item.
	Expand map[string][][]corev1.EnvVar `json:"expand,omitempty"`
	// Setup marks a setup task (as_setup); TeardownOf, on a teardown task, lists
	// the setup tasks it tears down (as_teardown(setups=...)), which are upstream
	// of it too.
	Setup      bool     `json:"setup,omitempty"`
	TeardownOf []string `json:"teardown_of,omitempty"`
}

// WriteJSON writes the .kpo.json file to w: KPOFile as encoding/json indents it
// by two spaces, and a line break. Each task is encoded and written in turn.
func (d *DAG) WriteJSON(w io.Writer) error {
	head, err := d.kpoHead()
	if err != nil {
		return err
	}
	if len(d.Tasks) == 0 {
		_, err := w.Write(append(head, kpoNoTasks...))
		return err
	}
	if _, err := w.Write(append(head, kpoTasks...)); err != nil {
		return err
	}
	k := &kpoWriter{w: w}
	for i := range d.Tasks {
		if err := k.write(&d.Tasks[i]); err != nil {
			return err
		}
	}
	_, err = w.Write([]byte(kpoEnd))
	return err
}

// The .kpo.json file is its head (kpoHead), then kpoNoTasks, or kpoTasks, each
// task (kpoWriter) and kpoEnd.
const (
	kpoNoTasks = "[]\n}\n"
	kpoTasks   = "[\n"
	kpoEnd     = "\n  ]\n}\n"
)

// kpoHead returns KPOFile of d as encoding/json indents it, up to the list of
// its tasks, which is the last field.
func (d *DAG) kpoHead() ([]byte, error) {
	file := KPOFile{DAGID: d.ID, Params: map[string]string{}, Tasks: []KPOTask{}}
	if d.Schedule != "" {
		file.Schedule = &d.Schedule
	}
	for _, p := range d.Params {
		file.Params[p.Name] = p.Value
	}
	head, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return nil, err
	}
	const empty = "[]\n}"
	if !bytes.HasSuffix(head, []byte(empty)) {
		return nil, fmt.Errorf("kpo.json: the encoded file ends with %q, not with its tasks", head[max(0, len(head)-len(empty)):])
	}
	return head[:len(head)-len(empty)], nil
}

// kpoWriter writes the tasks of a .kpo.json file to w, each as an element of
// the file's list of tasks, as it comes.
type kpoWriter struct {
	w    io.Writer
	n    int // tasks written
	task bytes.Buffer
	b    []byte
}

// write writes t.
func (k *kpoWriter) write(t *Task) error {
	kt := kpoTask(t)
	compact, err := json.Marshal(&kt)
	if err != nil {
		return err
	}
	k.task.Reset()
	if err := json.Indent(&k.task, compact, "    ", "  "); err != nil {
		return err
	}
	k.b = k.b[:0]
	if k.n > 0 {
		k.b = append(k.b, ",\n"...)
	}
	k.n++
	k.b = append(k.b, "    "...)
	k.b = append(k.b, k.task.Bytes()...)
	_, err = k.w.Write(k.b)
	return err
}

// kpoTask returns t as KPOTask.
func kpoTask(t *Task) KPOTask {
	kt := KPOTask{TaskID: t.ID, Upstream: append([]string{}, t.Upstream...), Operator: Operators[t.Operator] + "." + t.Operator, Arguments: map[string]any{}}
	for _, a := range t.Args {
		v := a.Value
		if d, ok := v.(time.Duration); ok {
			v = d.Seconds()
		}
		kt.Arguments[a.Name] = v
	}
	kt.Setup, kt.TeardownOf = t.Setup, t.Setups
	if t.Items != nil {
		kt.Expand = map[string][][]corev1.EnvVar{"env_vars": t.Items}
	}
	return kt
}
