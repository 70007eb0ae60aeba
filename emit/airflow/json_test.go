package airflow

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/manifoldflow/manifold/plan"
)

// jsonHostile are strings that encoding/json escapes, or that hold what a
// hand-written indenter could take for structure: quotes and backslashes in
// every order, JSON's punctuation, HTML's <, > and &, U+2028 and U+2029, control
// characters and bytes that are not UTF-8.
var jsonHostile = append([]string{
	`\\`, `\"`, `\\"`, `\\\"`, `"\`, `a\`, `{}`, `[]`, `{"a":[1,{}]}`, `,`, `:`, `", "`, `":{`,
	"<script>&amp;</script>", "\u2029", "a\u2028b", "\x01\x02\x1b", "\xff", "\xc3(", "é\xe2\x82",
	" ", "  leading", "trailing  ", "{{ params['a-b'] }}",
}, quoteCases...)

// indentCases are values whose compact JSON appendIndented is given: every
// kind of JSON value, empty and nested, and every hostile string as a value
// and as a key.
func indentCases() []any {
	cases := []any{
		nil, true, false, 0, -1.5, 1e21, 3.0, "", []any{}, map[string]any{},
		[]any{[]any{}, map[string]any{}, []any{[]any{}}, nil},
		map[string]any{"a": map[string]any{"b": []any{}, "c": map[string]any{}}, "d": []any{1, "x", nil, false}},
		[][]corev1.EnvVar{{{Name: "A", Value: "<&>"}}, {}},
	}
	for _, s := range jsonHostile {
		cases = append(cases, s, []any{s, s}, map[string]any{s: s, "k": []any{s, map[string]any{s: []any{}}}})
	}
	return cases
}

// TestAppendIndentedIsIndent: appendIndented indents what encoding/json
// marshals exactly as json.Indent does, with the .kpo.json file's prefix and
// with none.
func TestAppendIndentedIsIndent(t *testing.T) {
	for _, v := range indentCases() {
		compact, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, style := range [][2]string{{kpoIndent, "  "}, {"", "\t"}, {">", ""}} {
			var want bytes.Buffer
			if err := json.Indent(&want, compact, style[0], style[1]); err != nil {
				t.Fatal(err)
			}
			got := appendIndented([]byte("head"), compact, style[0], style[1])
			if string(got) != "head"+want.String() {
				t.Errorf("%s with prefix %q, indent %q:\n%s", compact, style[0], style[1], cmp.Diff("head"+want.String(), string(got)))
			}
		}
	}
}

// FuzzAppendIndented: for any string, in any place a value or a key can be,
// appendIndented gives json.Indent's bytes.
func FuzzAppendIndented(f *testing.F) {
	for _, s := range jsonHostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		compact, err := json.Marshal(map[string]any{s: []any{s, map[string]any{}, []any{}, map[string]any{"k": s, s: 1.5}}})
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact, kpoIndent, "  "); err != nil {
			t.Fatal(err)
		}
		if got := appendIndented(nil, compact, kpoIndent, "  "); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s:\n%s", compact, cmp.Diff(want.String(), string(got)))
		}
	})
}

// TestWriteJSONHostileIsMarshalIndent: tasks whose ids, upstream tasks and
// arguments of every kind hold hostile strings are written byte for byte as
// encoding/json indents the whole file.
func TestWriteJSONHostileIsMarshalIndent(t *testing.T) {
	d := &DAG{ID: "hostile<&>\u2028", Schedule: "0 * * * *", Params: []plan.Param{{Name: "p\u2029", Value: "<v>\x01"}}}
	for i, s := range jsonHostile {
		q := resource.MustParse("1500m")
		task := Task{
			ID:       "t" + s,
			Upstream: []string{s, "u"},
			Operator: PodOperator,
			Args: []Arg{
				{Name: "name", Value: s},
				{Name: "cmds", Value: []string{s, ""}},
				{Name: "env_vars", Value: []corev1.EnvVar{{Name: s, Value: s}, {Name: "EMPTY"}}},
				{Name: "labels", Value: map[string]string{s: s}},
				{Name: "template", Value: Template(s)},
				{Name: "timeout", Value: time.Duration(i) * 1500 * time.Millisecond},
				{Name: "number", Value: float64(i) / 3},
				{Name: "flag", Value: i%2 == 0},
				{Name: "none", Value: nil},
				{Name: "empty", Value: map[string]any{}},
				{Name: "resources", Value: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: q}}},
				{Name: "pod", Value: &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Args: []string{s}}}}}},
			},
			Setup:  i%3 == 0,
			Setups: []string{s},
		}
		if i%4 == 0 {
			task.Items = [][]corev1.EnvVar{{{Name: "I", Value: s}}, {}}
		}
		d.Tasks = append(d.Tasks, task)
	}
	// A task of nothing but its name, one whose items are none, and one with
	// an argument given twice (the last counts, as in the map).
	d.Tasks = append(d.Tasks, Task{ID: "bare", Operator: PodOperator},
		Task{ID: "no-items", Operator: JobOperator, Items: [][]corev1.EnvVar{}, Args: []Arg{{Name: "b", Value: 1}, {Name: "a", Value: "<a>"}}},
		Task{ID: "twice", Operator: PodOperator, Args: []Arg{{Name: "name", Value: "first"}, {Name: "a", Value: nil}, {Name: "name", Value: "last"}, {Name: "b", Value: "b"}, {Name: "name", Value: "third"}}})
	wantMarshalIndent(t, "hostile", d)
}
