package emit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"slices"
)

// noise names the keys whose empty values the API types serialize but say nothing:
// creationTimestamp: null, status: {}, resources: {}, and Argo's inputs: {},
// outputs: {} and arguments: {}. An empty map under any other key (emptyDir: {})
// means something and is kept.
var noise = map[string]bool{"status": true, "resources": true, "metadata": true, "securityContext": true,
	"inputs": true, "outputs": true, "arguments": true}

// YAML returns objects as one multi-document YAML stream: keys sorted, nulls, empty
// noise and each object's status removed, documents separated by "---", after an
// optional header comment. The same objects always give the same bytes.
func YAML(header string, objects ...any) ([]byte, error) {
	var b bytes.Buffer
	if err := WriteYAML(&b, header, objects...); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteYAML writes to w what YAML returns, one object at a time.
//
// Each object is written in one pass over its value, as encoding/json sees it
// (json tags, omitempty, MarshalJSON), in the form go.yaml.in/yaml/v2 gives the
// same data: the bytes are those of marshaling the object to JSON, decoding that
// into a generic tree, cleaning it and encoding the tree with yaml.v2.
func WriteYAML(w io.Writer, header string, objects ...any) error {
	return WriteYAMLSeq(w, header, slices.Values(objects))
}

// WriteYAMLSeq is WriteYAML for the objects objects yields, each written as it
// comes, so that none need be kept once it is written.
func WriteYAMLSeq(w io.Writer, header string, objects iter.Seq[any]) error {
	return WriteYAMLSized(w, header, objects, nil)
}

// WriteYAMLSized is WriteYAMLSeq that, when sized is not nil, calls it with the
// size in bytes of each document (without the separator before it) once the
// document is written.
func WriteYAMLSized(w io.Writer, header string, objects iter.Seq[any], sized func(bytes int)) (err error) {
	defer func() {
		if r := recover(); r != nil {
			ee, ok := r.(encodeError)
			if !ok {
				panic(r)
			}
			err = ee.err
		}
	}()
	e := &encoder{}
	if header != "" {
		e.buf = fmt.Appendf(e.buf, "# %s\n", header)
	}
	n := 0
	for obj := range objects {
		if n > 0 || header != "" {
			e.buf = append(e.buf, "---\n"...)
		}
		n++
		start := len(e.buf)
		e.document(obj)
		if _, err := w.Write(e.buf); err != nil {
			return err
		}
		if sized != nil {
			sized(len(e.buf) - start)
		}
		e.buf = e.buf[:0]
	}
	if n == 0 && len(e.buf) > 0 {
		_, err := w.Write(e.buf)
		return err
	}
	return nil
}

// JSON returns obj as JSON, each level indented by indent (all on one line when
// indent is ""), cleaned as YAML cleans it: keys sorted, nulls, empty noise and
// status removed, and no HTML escaping of <, > and &. The same object always gives
// the same bytes.
func JSON(obj any, indent string) ([]byte, error) {
	tree, err := clean(obj)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(tree); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
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
