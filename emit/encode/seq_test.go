package encode_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit/encode"
)

// podList is a pod list whose items are a Seq, as a streamed document has
// them; it writes as corev1.PodList does.
type podList struct {
	metav1.TypeMeta `json:",inline"`
	Items           encode.Seq `json:"items"`
}

func pods(n int) []corev1.Pod {
	out := make([]corev1.Pod, n)
	for i := range out {
		out[i] = corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"i": fmt.Sprint(i)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox",
				Command: []string{"sh", "-c", strings.Repeat("a long command line that folds ", i%5)}}}}}
	}
	return out
}

func seqOf(items []corev1.Pod) encode.Seq {
	return func(yield func(any) bool) {
		for i := range items {
			if !yield(&items[i]) {
				return
			}
		}
	}
}

// chunks records the writes it is given.
type chunks struct {
	bytes.Buffer
	writes int
}

func (c *chunks) Write(p []byte) (int, error) {
	c.writes++
	return c.Buffer.Write(p)
}

// TestSeqWritesAsASlice checks that a Seq is written in the bytes of a slice
// of its items, nested in a sequence and in a mapping, at every size (none,
// one, many, and enough to be passed on to the writer before the document
// ends), and that the sizes reported count the whole document.
func TestSeqWritesAsASlice(t *testing.T) {
	meta := metav1.TypeMeta{APIVersion: "v1", Kind: "List"}
	for _, n := range []int{0, 1, 3, 2000} {
		items := pods(n)
		want, err := encode.YAML("h", &corev1.PodList{TypeMeta: meta, Items: items},
			map[string]any{"a": []any{items}, "b": 1}, map[string]any{"tasks": []any{}})
		if err != nil {
			t.Fatal(err)
		}
		var got chunks
		var sizes []int
		err = encode.WriteYAMLSized(&got, "h", slices.Values([]any{
			&podList{TypeMeta: meta, Items: seqOf(items)},
			map[string]any{"a": []any{seqOf(items)}, "b": 1},
			map[string]any{"tasks": encode.Seq(func(func(any) bool) {})},
		}), func(n int) { sizes = append(sizes, n) })
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("%d items: got\n%s\nwant\n%s", n, got.String(), want)
		}
		docs := strings.Split(strings.TrimPrefix(string(want), "# h\n---\n"), "---\n")
		for i, d := range docs {
			if i < len(sizes) && sizes[i] != len(d) {
				t.Errorf("%d items: document %d's size is %d, want %d", n, i, sizes[i], len(d))
			}
		}
		if n == 2000 && got.writes < 3 {
			t.Errorf("%d items written in %d writes: the Seq's items were not passed on as written", n, got.writes)
		}
	}
	// A nil Seq is a nil slice.
	got, err := encode.YAML("", &podList{TypeMeta: meta})
	if err != nil {
		t.Fatal(err)
	}
	if want := "apiVersion: v1\nkind: List\n"; string(got) != want {
		t.Errorf("nil Seq: got %q, want %q", got, want)
	}
	// JSON writes a Seq as an array.
	j, err := encode.JSON(&podList{TypeMeta: meta, Items: seqOf(pods(2))}, "")
	if err != nil {
		t.Fatal(err)
	}
	wantJ, err := encode.JSON(&corev1.PodList{TypeMeta: meta, Items: pods(2)}, "")
	if err != nil {
		t.Fatal(err)
	}
	if string(j) != string(wantJ) {
		t.Errorf("JSON: got %s, want %s", j, wantJ)
	}
}

type failing struct{ after int }

func (f *failing) Write(p []byte) (int, error) {
	if f.after -= len(p); f.after < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestSeqWriteError checks that a write that fails while a Seq is written
// is returned.
func TestSeqWriteError(t *testing.T) {
	err := encode.WriteYAMLSeq(&failing{after: 100 << 10}, "", slices.Values([]any{&podList{Items: seqOf(pods(5000))}}))
	if err == nil || err.Error() != "disk full" {
		t.Fatalf("got %v, want disk full", err)
	}
}
