package encode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// viaYAMLv2 is how YAML wrote objects before it wrote them in one pass: each
// object to JSON, into a generic tree, cleaned, and through yaml.v2. YAML must
// give the same bytes.
func viaYAMLv2(header string, objects ...any) ([]byte, error) {
	var b bytes.Buffer
	if header != "" {
		fmt.Fprintf(&b, "# %s\n", header)
	}
	for i, obj := range objects {
		tree, err := clean(obj)
		if err != nil {
			return nil, err
		}
		out, err := yaml.Marshal(tree)
		if err != nil {
			return nil, err
		}
		if i > 0 || header != "" {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	return b.Bytes(), nil
}

// clean returns obj as a generic tree without nulls, empty noise or status.
func clean(obj any) (any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	// Numbers stay exact (json.Number, then int64), and the tree goes to the
	// encoder directly: re-reading JSON as YAML would refuse characters such as DEL
	// that the YAML encoder writes escaped.
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	// An object's status is the controller's to write; some API types serialize
	// zero counters there (JobSet's restarts: 0).
	if m, ok := tree.(map[string]any); ok {
		delete(m, "status")
	}
	return prune(tree), nil
}

// prune removes nulls everywhere and the empty noise maps, and turns numbers into
// Go numbers.
func prune(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			child = prune(child)
			if child == nil {
				delete(t, k)
				continue
			}
			if m, ok := child.(map[string]any); ok && len(m) == 0 && noise[k] {
				delete(t, k)
				continue
			}
			t[k] = child
		}
		return t
	case []any:
		for i := range t {
			t[i] = prune(t[i])
		}
		return t
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

// viaCleanJSON is how JSON wrote an object before it wrote it in one pass: the
// cleaned tree through encoding/json. JSON must give the same bytes.
func viaCleanJSON(obj any) ([]byte, error) {
	tree, err := clean(obj)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(tree); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func sameAsYAMLv2(t *testing.T, objects ...any) {
	t.Helper()
	want, err := viaYAMLv2("h", objects...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := YAML("h", objects...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("YAML differs from yaml.v2 (-want +got):\n%s", diff)
	}
	for _, obj := range objects {
		want, err := viaCleanJSON(obj)
		if err != nil {
			t.Fatal(err)
		}
		got, err := JSON(obj, "")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("JSON differs from encoding/json's of the cleaned tree (-want +got):\n%s", diff)
		}
	}
}

// placed puts s wherever a string can be: a value at several depths and
// columns, a key, a list item, a list of lists, a value of a map of strings
// (labels) and Argo's AnyString.
func placed(s string) map[string]any {
	return map[string]any{
		"a":      s,
		s:        s,
		"list":   []any{s, map[string]any{s: s, "k": []any{s}}, []any{s, []any{s}}},
		"deep":   map[string]any{"deeper": map[string]any{"deepest-key-that-is-long-enough-to-push-columns": s}},
		"status": s,
		"labels": map[string]string{"k": s, "long-key-that-pushes-the-value-past-its-column": s},
		"param":  wfv1.Parameter{Name: "p", Value: wfv1.AnyStringPtr(s)},
	}
}

var tricky = []string{
	"", " ", "a", "yes", "no", "on", "off", "y", "N", "~", "null", "true", "FALSE", "0755", "1e3", "1_000", "0x1F", "0b101", "-0b11",
	"+1", "-", "- ", "- a", "-a", ": ", "a: b", "a:b", ":a", "?", "? a", "#", "a #b", "a#b", "*a", "&a", "!a", "|", ">", "'", "\"", "%", "@", "`",
	"{", "}", "[a]", "a,b", "---", "...", "--- a", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10", "1:20", "190:20:30.15",
	".5", ".inf", "-.Inf", ".NaN", "+.5", "3.", "1.2.3", "<<", "a\nb", "a\n", "a\n\n", "\n", "\na", " a", "a ", "a \nb", "a\n b", "\ta", "a\tb",
	"a\rb", "a\u0085b", "a\u2028b", "\u00a0", "é", "日本語", "😀", "a😀b", "\ufeffbom", "a\ufeff", "\x00", "\x07", "\x1b[0m", "\x7f", "\xff", "a\xffb",
	"{{workflow.parameters.p}}", "{% raw %}", "$(echo hi)", `C:\path`, `say "hi"`, "it's",
	strings.Repeat("word ", 40), strings.Repeat("x", 100) + " " + strings.Repeat("y", 100), strings.Repeat("a  b ", 30), "'" + strings.Repeat("q ", 60) + "'",
	"{" + strings.Repeat(`"k": "v v", `, 20) + "}", strings.Repeat("line of text\n", 5), strings.Repeat("é ", 60), strings.Repeat("\x01 ", 50),
	strings.Repeat("k", 128), strings.Repeat("k", 129),
}

func TestYAMLMatchesYAMLv2OnStrings(t *testing.T) {
	for _, s := range tricky {
		sameAsYAMLv2(t, placed(s))
	}
}

func TestYAMLMatchesYAMLv2OnRandomStrings(t *testing.T) {
	const alphabet = "ab :#-?'\"\n\t\r{}[],&*!|>%@`~.01eE+_\\é😀\u2028\u0085\x00\x7f"
	runes := []rune(alphabet)
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		b := make([]rune, r.IntN(120))
		for i := range b {
			b[i] = runes[r.IntN(len(runes))]
		}
		sameAsYAMLv2(t, placed(string(b)))
	}
}

// TestYAMLMatchesYAMLv2OnRepeatedStrings: a stream whose documents repeat
// strings from one to the next, among more strings than the emitter keeps the
// analysis of, is written as yaml.v2 writes it.
func TestYAMLMatchesYAMLv2OnRepeatedStrings(t *testing.T) {
	var objects []any
	for i := range analyzedMax + 100 {
		s := tricky[i%len(tricky)]
		objects = append(objects, placed(s), placed("a: "+strconv.Itoa(i)), placed(s))
	}
	sameAsYAMLv2(t, objects...)
}

func FuzzYAMLMatchesYAMLv2(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameAsYAMLv2(t, placed(s))
	})
}

type embedded struct {
	Shared string `json:"shared"`
	Inner  string `json:"inner,omitempty"`
}

type Promoted struct {
	Promoted string `json:"promoted,omitempty"`
}

type kinds struct {
	embedded `json:",inline"`
	*Promoted
	Shared    string      `json:"shared"` // hides embedded's
	Int8      int8        `json:"int8"`
	Uint64    uint64      `json:"uint64"`
	Float32   float32     `json:"float32"`
	Float64   float64     `json:"float64"`
	Whole     float64     `json:"whole"`
	Huge      float64     `json:"huge"`
	Bytes     []byte      `json:"bytes"`
	Quoted    int         `json:"quoted,string"`
	Omitted   string      `json:"omitted,omitempty"`
	Zero      metav1.Time `json:"zero,omitzero"`
	Skipped   string      `json:"-"`
	Untagged  string
	IntKeys   map[int]string     `json:"intKeys"`
	Empty     map[string]string  `json:"empty"`
	EmptyList []string           `json:"emptyList"`
	NilList   []string           `json:"nilList"`
	Ptrs      []*int             `json:"ptrs"`
	Any       any                `json:"any"`
	Resources struct{}           `json:"resources"`
	Status    map[string]int     `json:"status"`
	Quantity  resource.Quantity  `json:"quantity"`
	IntStr    intstr.IntOrString `json:"intStr"`
	Time      metav1.Time        `json:"time"`
	Raw       map[string]any     `json:"raw"`
}

func TestYAMLMatchesYAMLv2OnEveryKind(t *testing.T) {
	one := 1
	k := kinds{
		embedded: embedded{Shared: "hidden", Inner: "in"}, Promoted: &Promoted{Promoted: "p"}, Shared: "shown",
		Int8: -8, Uint64: math.MaxUint64, Float32: 0.1, Float64: 1e-7, Whole: 3, Huge: 1e21, Bytes: []byte("bytes"),
		Quoted: 7, Skipped: "x", Untagged: "u", IntKeys: map[int]string{10: "ten", 9: "nine"}, Empty: map[string]string{},
		EmptyList: []string{}, Ptrs: []*int{&one, nil}, Any: map[string]any{"b": []any{1, "2", nil}, "a": struct{}{}},
		Status: map[string]int{"restarts": 0}, Quantity: resource.MustParse("1.5Gi"), IntStr: intstr.FromString("50%"),
		Time: metav1.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), Raw: map[string]any{"metadata": map[string]any{}, "x10": 1, "x9": 2, "x09": 3, "X": 4, "_": 5},
	}
	sameAsYAMLv2(t, k, &k, map[string]any{"status": 1, "kept": k})
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{"a": "1"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", "echo 'hi'\nexit 0\n"},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"cpu": resource.MustParse("500m")}},
				Ports:     []corev1.ContainerPort{{ContainerPort: 29500}}}},
			Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}},
		Status: batchv1.JobStatus{Active: 1},
	}
	sameAsYAMLv2(t, job, job)
	sameAsYAMLv2(t)
	sameAsYAMLv2(t, nil, "top", 1, []any{})
}

// TestYAMLMatchesYAMLv2OnTypedMaps: the maps of strings and the resource lists
// that labels, annotations, requests and limits are, written without
// reflection, are written as yaml.v2 writes them: tricky strings as keys and
// values, keys that order by their digits, empty maps, maps at the root (whose
// status goes) and under keys whose empty value is noise, in JSON as well.
func TestYAMLMatchesYAMLv2OnTypedMaps(t *testing.T) {
	strs := map[string]string{"status": "s", "x10": "a", "x9": "b", "x09": "c", "X": "d", "_": "e", "a\xffb": "f", "g": "a\xffb"}
	// Keys in an order yaml.v2's comparison settles whatever the map's order
	// (it is not a total order on every string), each value a tricky string.
	for i, s := range tricky {
		strs[fmt.Sprintf("k%03d", i)] = s
	}
	quantities := corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("1.5Gi"),
		"nvidia.com/gpu": resource.MustParse("8"), "aws.amazon.com/neuron": resource.MustParse("16"),
		"ephemeral-storage": resource.MustParse("100G"), "status": resource.MustParse("1e3"), "x\xff": resource.MustParse("0.1")}
	type holder struct {
		Labels      map[string]string           `json:"labels"`
		Empty       map[string]string           `json:"metadata"`
		Nil         map[string]string           `json:"nil"`
		Resources   corev1.ResourceRequirements `json:"resources"`
		NoResources corev1.ResourceRequirements `json:"noResources"`
		List        corev1.ResourceList         `json:"list"`
		EmptyList   corev1.ResourceList         `json:"emptyList"`
	}
	h := holder{Labels: strs, Empty: map[string]string{}, List: quantities, EmptyList: corev1.ResourceList{},
		Resources: corev1.ResourceRequirements{Requests: quantities, Limits: corev1.ResourceList{}}}
	sameAsYAMLv2(t, h, &h, strs, quantities, map[string]string{}, corev1.ResourceList{}, []any{strs, quantities})
}

// TestYAMLMatchesYAMLv2OnAnyString: Argo's AnyString, written as the string it
// holds rather than through its MarshalJSON, is written as yaml.v2 writes what
// that MarshalJSON gives: every tricky string, HTML characters and bytes that
// are not UTF-8, as a value, behind a pointer and in a list, in JSON as well.
func TestYAMLMatchesYAMLv2OnAnyString(t *testing.T) {
	for _, s := range append(tricky, "<a & b>", "\u2028\u2029") {
		p := wfv1.Parameter{Name: "p", Value: wfv1.AnyStringPtr(s), Default: wfv1.AnyStringPtr(s)}
		sameAsYAMLv2(t, p, map[string]any{"v": wfv1.AnyString(s), "list": []wfv1.AnyString{wfv1.AnyString(s), ""}})
	}
}

// TestYAMLMatchesYAMLv2OnFieldNames: struct fields whose names are written as
// they stand, and those that are not (read back as another type, quoted,
// longer than a simple key), are written as yaml.v2 writes them, at every
// depth.
func TestYAMLMatchesYAMLv2OnFieldNames(t *testing.T) {
	type names struct {
		Plain   string         `json:"plain"`
		Yes     string         `json:"yes"`
		Number  string         `json:"123"`
		Float   string         `json:"1e3"`
		Base60  string         `json:"1:20"`
		Colon   string         `json:"a: b"`
		Spaced  string         `json:"two words"`
		Long    string         `json:"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"`
		Unicode string         `json:"é"`
		Nested  map[string]any `json:"nested"`
	}
	n := names{Plain: "p", Yes: "y", Number: "n", Float: "f", Base60: "b", Colon: "c", Spaced: "s", Long: "l", Unicode: "u"}
	n.Nested = map[string]any{"in": n, "list": []any{n, []any{n}}}
	sameAsYAMLv2(t, n, []any{n})
}
