package encode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
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
// into a generic tree, cleaning it and encoding the tree with yaml.v2, but that
// strings a YAML 1.1 loader reads as another type are double-quoted (see the
// package comment).
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
	e := &encoder{w: w}
	if header != "" {
		for _, l := range strings.Split(header, "\n") {
			e.buf = fmt.Appendf(e.buf, "%s\n", strings.TrimRight("# "+l, " "))
		}
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
			sized(e.flushed + len(e.buf) - start)
		}
		e.buf, e.flushed = e.buf[:0], 0
	}
	if n == 0 && len(e.buf) > 0 {
		_, err := w.Write(e.buf)
		return err
	}
	return nil
}

// JSON returns obj as JSON, each level indented by indent (all on one line when
// indent is ""), cleaned as YAML cleans it: nulls, empty noise and status
// removed. Keys are in byte order, as encoding/json writes a map, and <, > and &
// are not escaped. It is written in one pass over obj, as YAML is. The same
// object always gives the same bytes.
func JSON(obj any, indent string) (data []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			ee, ok := r.(encodeError)
			if !ok {
				panic(r)
			}
			data, err = nil, ee.err
		}
	}()
	e := &encoder{json: true}
	e.document(obj)
	if indent == "" {
		return e.buf, nil
	}
	var b bytes.Buffer
	if err := json.Indent(&b, e.buf, "", indent); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
