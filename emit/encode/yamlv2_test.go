package encode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"math"
	"math/rand/v2"
	"slices"
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

	"github.com/manifoldflow/manifold/harness/yamlload"
)

// viaYAMLv2 is how YAML wrote objects before it wrote them in one pass: each
// object to JSON, into a generic tree, cleaned, and through yaml.v2. YAML must
// give the same bytes, but that it double-quotes the strings yaml.v2 writes
// plain that a YAML 1.1 loader reads as another type (readsAsOther): so each
// such string goes to yaml.v2 as a stand-in that yaml.v2 double-quotes itself
// and writes as wide, ordered among the keys beside it as the string is, and
// the stand-in's quoted form in yaml.v2's bytes is swapped back. exact is
// false when a string has no stand-in (it holds a space, where a writer may
// fold it): then the bytes cannot be compared, only what they load as.
func viaYAMLv2(header string, objects ...any) (out []byte, exact bool, err error) {
	var b bytes.Buffer
	if header != "" {
		fmt.Fprintf(&b, "# %s\n", header)
	}
	exact = true
	for i, obj := range objects {
		tree, err := clean(obj)
		if err != nil {
			return nil, false, err
		}
		swaps, ok := standIns(tree)
		exact = exact && ok
		out, err := yaml.Marshal(swap(tree, swaps))
		if err != nil {
			return nil, false, err
		}
		for s, d := range swaps {
			quoted := []byte(`"` + d + `"`)
			if !bytes.Contains(out, quoted) {
				return nil, false, fmt.Errorf("yaml.v2 does not double-quote the stand-in %q of %q", d, s)
			}
			out = bytes.ReplaceAll(out, quoted, []byte(`"`+s+`"`))
		}
		if i > 0 || header != "" {
			b.WriteString("---\n")
		}
		b.Write(out)
	}
	return b.Bytes(), exact, nil
}

// standIns gives each string of tree that YAML double-quotes where yaml.v2
// writes it plain a stand-in: a string yaml.v2 reads as another type, as long
// and of characters written as they are, found nowhere in tree, and ordered as
// the string is among the keys of every mapping it is a key of. ok is false
// when a string has none.
func standIns(tree any) (swaps map[string]string, ok bool) {
	all := map[string]bool{}
	var maps [][]string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			all[t] = true
		case []any:
			for _, x := range t {
				walk(x)
			}
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k, x := range t {
				all[k] = true
				keys = append(keys, k)
				walk(x)
			}
			maps = append(maps, keys)
		}
	}
	walk(tree)
	swaps, used := map[string]string{}, map[string]bool{}
	ok = true
	for s := range all {
		if !readsAsOther(s) || !resolvesToString(s) || isBase60Float(s) ||
			strings.Contains(s, "\n") || !analyzeScalar(s).singleQuoted {
			continue // yaml.v2 double-quotes it itself, or writes it literal
		}
		if strings.Contains(s, " ") || !printableASCII(s) {
			ok = false // its stand-in would be written wider, or folded otherwise
			continue
		}
		var siblings [][]string
		for _, keys := range maps {
			if slices.Contains(keys, s) {
				siblings = append(siblings, keys)
			}
		}
		found := false
		for d := range candidates(len(s)) {
			if all[d] || used[d] || !sortsAs(d, s, siblings) {
				continue
			}
			swaps[s], used[d], found = d, true, true
			break
		}
		ok = ok && found
	}
	return swaps, ok
}

// candidates yields strings of n characters that yaml.v2 reads as a number, a
// boolean or null.
func candidates(n int) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, w := range strings.Fields("y Y n N ~ no No NO on On ON yes Yes YES off Off OFF true True TRUE null Null NULL false False FALSE") {
			if len(w) == n && !yield(w) {
				return
			}
		}
		for _, prefix := range []string{"", "-", "+", "."} {
			if len(prefix) >= n {
				continue
			}
			for k := range 1000 {
				d := prefix + strings.Repeat("0", max(0, n-len(prefix)-3)) + fmt.Sprintf("%0*d", min(3, n-len(prefix)), k)
				if len(d) > n {
					break
				}
				if !yield(d) {
					return
				}
			}
		}
	}
}

// sortsAs reports whether d orders against every other key of each of
// siblings as s does.
func sortsAs(d, s string, siblings [][]string) bool {
	for _, keys := range siblings {
		for _, k := range keys {
			if k != s && keyCompare(d, k) != keyCompare(s, k) {
				return false
			}
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7E || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// swap returns tree with its strings, keys and values, swapped as swaps says.
func swap(tree any, swaps map[string]string) any {
	if len(swaps) == 0 {
		return tree
	}
	switch t := tree.(type) {
	case string:
		if d, ok := swaps[t]; ok {
			return d
		}
		return t
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = swap(x, swaps)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			if d, ok := swaps[k]; ok {
				k = d
			}
			out[k] = swap(x, swaps)
		}
		return out
	}
	return tree
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
	want, exact, err := viaYAMLv2("h", objects...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := YAML("h", objects...)
	if err != nil {
		t.Fatal(err)
	}
	if !exact {
		loadsAsWritten(t, got, objects...)
	} else if diff := cmp.Diff(string(want), string(got)); diff != "" {
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

// loadsAsWritten checks that Kubernetes (sigs.k8s.io/yaml) and yaml.v3 read
// data, YAML's stream of objects, as the objects JSON writes.
func loadsAsWritten(t *testing.T, data []byte, objects ...any) {
	t.Helper()
	var want []any
	for _, obj := range objects {
		js, err := JSON(obj, "")
		if err != nil {
			t.Fatal(err)
		}
		v, err := yamlload.JSON(js)
		if err != nil {
			t.Fatal(err)
		}
		if v != nil {
			want = append(want, v)
		}
	}
	for name, load := range map[string]func([]byte) ([]any, error){"kubernetes": yamlload.Kubernetes, "yaml.v3": yamlload.V3} {
		got, err := load(data)
		if err != nil {
			t.Errorf("%s refuses what YAML wrote: %v\n%s", name, err, data)
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s reads other objects than YAML wrote (-wrote +read):\n%s\n%s", name, diff, data)
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

// tricky are the strings of the fuzz corpus.
var tricky = yamlload.Tricky

func TestYAMLMatchesYAMLv2OnStrings(t *testing.T) {
	for _, s := range slices.Concat(tricky, yamlload.Special, yamlload.Controls()) {
		sameAsYAMLv2(t, placed(s))
		loadsAlike(t, placed(s))
	}
}

// loadsAlike checks that Kubernetes and yaml.v3 read what YAML writes of obj
// as the object JSON writes.
func loadsAlike(t *testing.T, obj any) {
	t.Helper()
	data, err := YAML("h", obj)
	if err != nil {
		t.Fatal(err)
	}
	loadsAsWritten(t, data, obj)
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
		loadsAlike(t, placed(string(b)))
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
		loadsAlike(t, placed(s))
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

// TestPyYAMLReadsWhatYAMLWrote: PyYAML's safe loader, its Python parser and
// libyaml's, reads every tricky and special string and control character,
// wherever placed puts it (a key among them), as the string it is.
func TestPyYAMLReadsWhatYAMLWrote(t *testing.T) {
	files, want := map[string][]byte{}, map[string][]any{}
	for i, s := range slices.Concat(tricky, yamlload.Special, yamlload.Controls()) {
		name := fmt.Sprintf("%d %q", i, s)
		data, err := YAML("h", placed(s))
		if err != nil {
			t.Fatal(err)
		}
		js, err := JSON(placed(s), "")
		if err != nil {
			t.Fatal(err)
		}
		v, err := yamlload.JSON(js)
		if err != nil {
			t.Fatal(err)
		}
		files[name], want[name] = data, []any{v}
	}
	for name, byLoader := range yamlload.Python(t, files) {
		for _, loader := range []string{"pyyaml", "libyaml"} {
			r := byLoader[loader]
			if r.Err != nil {
				t.Errorf("%s: %s refuses what YAML wrote: %v", name, loader, r.Err)
				continue
			}
			if diff := cmp.Diff(want[name], r.Docs); diff != "" {
				t.Errorf("%s: %s reads another value than YAML wrote (-wrote +read):\n%s", name, loader, diff)
			}
		}
	}
}
