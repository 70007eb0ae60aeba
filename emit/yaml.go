package emit

import (
	"bytes"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v2"
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
