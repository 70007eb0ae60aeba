package airflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
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
	// Gate, on a task of Manifold's own in a dynamic flow (a PythonOperator,
	// no pod), says what it does (Gate).
	Gate *Gate `json:"gate,omitempty"`
	// ExpandFrom, on a fan-out over a value found at run time, says what the
	// task is mapped over: the items task's XCom, each item's env_vars
	// being these, with MANIFOLD_ITEM (each "$" doubled), MANIFOLD_INDEX,
	// MANIFOLD_COUNT and the templates the items task rendered filled in.
	ExpandFrom *KPOExpandFrom `json:"expand_from,omitempty"`
}

// KPOExpandFrom is KPOTask.ExpandFrom.
type KPOExpandFrom struct {
	Task    string          `json:"task"`
	EnvVars []corev1.EnvVar `json:"env_vars"`
}

// WriteJSON writes the .kpo.json file to w: KPOFile as encoding/json indents it
// by two spaces, and a line break. Each task is encoded and written in turn.
func (d *DAG) WriteJSON(w io.Writer) error {
	head, err := d.kpoHead()
	if err != nil {
		return err
	}
	return writeKPO(w, head, len(d.Tasks), func(w io.Writer) error {
		k := &kpoWriter{w: w}
		for i := range d.Tasks {
			if err := k.write(&d.Tasks[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// writeKPO writes a .kpo.json file of head (kpoHead) and n tasks, which tasks
// writes (through a kpoWriter), to w.
func writeKPO(w io.Writer, head []byte, n int, tasks func(io.Writer) error) error {
	if n == 0 {
		_, err := w.Write(append(head, kpoNoTasks...))
		return err
	}
	if _, err := w.Write(append(head, kpoTasks...)); err != nil {
		return err
	}
	if err := tasks(w); err != nil {
		return err
	}
	_, err := w.Write([]byte(kpoEnd))
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
	// value holds a value that enc encoded; args are a task's arguments,
	// sorted.
	value bytes.Buffer
	enc   *json.Encoder
	args  []Arg
}

// write writes t: encoding/json's form of kpoTask(t), indented as json.Indent
// would indent it, by appendIndented.
func (k *kpoWriter) write(t *Task) error {
	k.task.Reset()
	if err := k.compact(t); err != nil {
		return err
	}
	k.b = k.b[:0]
	if k.n > 0 {
		k.b = append(k.b, ",\n"...)
	}
	k.n++
	k.b = append(k.b, kpoIndent...)
	k.b = appendIndented(k.b, k.task.Bytes(), kpoIndent, "  ")
	_, err := k.w.Write(k.b)
	return err
}

// compact writes to k.task what encoding/json's Encoder writes of
// kpoTask(t), less its line break: KPOTask's fields in their order, each
// value as the Encoder encodes it, and the arguments, a map, in the order of
// their names (the last of arguments of one name), without making the map
// and encoding it through reflection.
func (k *kpoWriter) compact(t *Task) error {
	k.task.WriteString(`{"task_id":`)
	if err := k.encode(t.ID); err != nil {
		return err
	}
	k.task.WriteString(`,"upstream":`)
	if len(t.Upstream) == 0 {
		k.task.WriteString("[]")
	} else if err := k.encode(t.Upstream); err != nil {
		return err
	}
	k.task.WriteString(`,"operator":`)
	if err := k.encode(Operators[t.Operator] + "." + t.Operator); err != nil {
		return err
	}
	k.task.WriteString(`,"arguments":{`)
	k.args = append(k.args[:0], t.Args...)
	slices.SortStableFunc(k.args, func(a, b Arg) int { return strings.Compare(a.Name, b.Name) })
	first := true
	for i, a := range k.args {
		if i+1 < len(k.args) && k.args[i+1].Name == a.Name {
			continue // a later argument of the name replaces it, as in a map
		}
		if !first {
			k.task.WriteByte(',')
		}
		first = false
		if err := k.encode(a.Name); err != nil {
			return err
		}
		k.task.WriteByte(':')
		if err := k.encode(kpoValue(a.Value)); err != nil {
			return err
		}
	}
	clear(k.args)
	k.task.WriteByte('}')
	if t.Items != nil {
		k.task.WriteString(`,"expand":{"env_vars":`)
		if err := k.encode(t.Items); err != nil {
			return err
		}
		k.task.WriteByte('}')
	}
	if t.Setup {
		k.task.WriteString(`,"setup":true`)
	}
	if len(t.Setups) > 0 {
		k.task.WriteString(`,"teardown_of":`)
		if err := k.encode(t.Setups); err != nil {
			return err
		}
	}
	if t.Gate != nil {
		k.task.WriteString(`,"gate":`)
		if err := k.encode(t.Gate); err != nil {
			return err
		}
	}
	if t.ItemsFrom != "" {
		k.task.WriteString(`,"expand_from":`)
		if err := k.encode(KPOExpandFrom{Task: t.ItemsFrom, EnvVars: t.ItemEnv}); err != nil {
			return err
		}
	}
	k.task.WriteByte('}')
	return nil
}

// encode writes v to k.task as encoding/json's Encoder encodes it (HTML
// characters escaped), less the line break after it.
func (k *kpoWriter) encode(v any) error {
	k.value.Reset()
	if k.enc == nil {
		k.enc = json.NewEncoder(&k.value)
	}
	if err := k.enc.Encode(v); err != nil {
		return err
	}
	k.task.Write(bytes.TrimSuffix(k.value.Bytes(), []byte("\n")))
	return nil
}

// kpoIndent is what begins each line of a task in the .kpo.json file.
const kpoIndent = "    "

// appendIndented appends src, compact JSON as encoding/json marshals it (no
// space outside its strings), to dst, indented exactly as json.Indent(dst,
// src, prefix, indent) indents it: each element of an object or array on a
// line of its own, a new line beginning with prefix and an indent a level, a
// space after each colon, and an empty object or array kept as {} or [].
// Unlike json.Indent it does not check src, and copies each string whole.
func appendIndented(dst, src []byte, prefix, indent string) []byte {
	newline := func(depth int) {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for range depth {
			dst = append(dst, indent...)
		}
	}
	open := false // an object or array is open, its first element not yet seen
	depth := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		if open && c != '}' && c != ']' {
			open = false
			depth++
			newline(depth)
		}
		switch c {
		case '"':
			end := stringEnd(src, i)
			dst = append(dst, src[i:end]...)
			i = end - 1
		case '{', '[':
			open = true
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline(depth)
		case ':':
			dst = append(dst, c, ' ')
		case '}', ']':
			if open {
				open = false
			} else {
				depth--
				newline(depth)
			}
			dst = append(dst, c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// stringEnd returns the index just past the JSON string that begins at
// src[start], a quote: past the first quote after it that no backslash
// escapes, or len(src) if there is none.
func stringEnd(src []byte, start int) int {
	for i := start + 1; i < len(src); {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			return len(src)
		}
		i += q
		backslashes := 0
		for j := i - 1; j > start && src[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return i + 1
		}
		i++
	}
	return len(src)
}

// kpoValue is an argument's value as the .kpo.json file holds it: a duration
// in seconds, as the operator's timeouts take it.
func kpoValue(v any) any {
	if d, ok := v.(time.Duration); ok {
		return d.Seconds()
	}
	return v
}

// kpoTask returns t as KPOTask.
func kpoTask(t *Task) KPOTask {
	kt := KPOTask{TaskID: t.ID, Upstream: append([]string{}, t.Upstream...), Operator: Operators[t.Operator] + "." + t.Operator, Arguments: map[string]any{}}
	for _, a := range t.Args {
		kt.Arguments[a.Name] = kpoValue(a.Value)
	}
	kt.Setup, kt.TeardownOf = t.Setup, t.Setups
	if t.Items != nil {
		kt.Expand = map[string][][]corev1.EnvVar{"env_vars": t.Items}
	}
	kt.Gate = t.Gate
	if t.ItemsFrom != "" {
		kt.ExpandFrom = &KPOExpandFrom{Task: t.ItemsFrom, EnvVars: t.ItemEnv}
	}
	return kt
}
