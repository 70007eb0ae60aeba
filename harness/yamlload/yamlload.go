// Package yamlload loads YAML, for tests, as the tools that users run over
// Manifold's manifests load it: sigs.k8s.io/yaml as Kubernetes does (the API
// machinery's document reader, then YAMLToJSON), go.yaml.in/yaml/v3, and PyYAML's
// safe loader, both its Python parser and libyaml's, in the Airflow test
// environment (Airflow depends on PyYAML); and it reads the strings of a Python
// file's literals with Python's own parser. Each gives a file's documents as
// canonical JSON values (encoding/json's, numbers as json.Number), so that what
// one loader read can be compared with what another did; a key that is not a
// string, or a value JSON has no type for (a timestamp, a set), is a string that
// names it, beginning with a NUL byte, which no loader reads from a manifest.
//
// It also holds the strings that tell YAML writers and loaders apart: every
// scalar that some loader resolves to another type than a string when it is
// written plain (Special), every control character (Controls), and what the
// module's fuzz corpora hold (Corpus).
package yamlload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "embed"

	yamlv3 "go.yaml.in/yaml/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/harness/airflowtest"
)

// Kubernetes loads data as kubectl and client tools do: the stream split into
// documents by the API machinery's reader, each converted by sigs.k8s.io/yaml
// (yaml.v2 underneath) to JSON. Empty documents are left out, as kubectl leaves
// them.
func Kubernetes(data []byte) ([]any, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		v, err := decodeJSON(js)
		if err != nil {
			return nil, err
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
}

// V3 loads data with go.yaml.in/yaml/v3, every document of the stream.
func V3(data []byte) ([]any, error) {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if v != nil {
			docs = append(docs, canonical(v))
		}
	}
}

// JSON returns the canonical form of a JSON document: what the loaders' forms
// are compared with.
func JSON(data []byte) (any, error) { return decodeJSON(data) }

func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canonical turns what yaml.v3 decoded into the canonical JSON form.
func canonical(v any) any {
	switch t := v.(type) {
	case nil, string, bool:
		return t
	case int:
		return json.Number(strconv.Itoa(t))
	case int64:
		return json.Number(strconv.FormatInt(t, 10))
	case uint64:
		return json.Number(strconv.FormatUint(t, 10))
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			return other(t)
		}
		data, _ := json.Marshal(t)
		return json.Number(data)
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = canonical(x)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			out[k] = canonical(x)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			s, ok := k.(string)
			if !ok {
				s = "\x00key " + other(k)
			}
			out[s] = canonical(x)
		}
		return out
	}
	return other(v)
}

// other names a value JSON has no type for.
func other(v any) string {
	if t, ok := v.(time.Time); ok {
		return "\x00timestamp " + t.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("\x00%s %v", reflect.TypeOf(v), v)
}

//go:embed load.py
var loadPy string

// Python loads each of files in one Python process of the Airflow test
// environment: a file whose name ends in ".py" is parsed by Python's own
// parser, which gives the strings of its literals (under the loader name
// "python"); any other with PyYAML's safe loader, by its Python parser
// ("pyyaml") and by libyaml's ("libyaml"), which give its documents or the
// error PyYAML raised. It fails t if Python cannot be run.
func Python(t testing.TB, files map[string][]byte) map[string]map[string]Result {
	t.Helper()
	dir := t.TempDir()
	var listing []string
	names := map[string]string{}
	i := 0
	for name, data := range files {
		ext := ".yaml"
		if strings.HasSuffix(name, ".py") {
			ext = ".py"
		}
		path := filepath.Join(dir, strconv.Itoa(i)+ext)
		i++
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		names[path] = name
		listing = append(listing, path)
	}
	script := filepath.Join(dir, "load.py")
	if err := os.WriteFile(script, []byte(loadPy), 0o644); err != nil {
		t.Fatal(err)
	}
	list := filepath.Join(dir, "files")
	if err := os.WriteFile(list, []byte(strings.Join(listing, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(airflowtest.Python(t), script, list)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Python's loader: %v\n%s", err, stderr.Bytes())
	}
	var raw map[string]map[string]struct {
		Docs    json.RawMessage `json:"docs"`
		Strings []string        `json:"strings"`
		Error   *string         `json:"error"`
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("Python's loader printed what is not JSON: %v", err)
	}
	results := map[string]map[string]Result{}
	for path, byLoader := range raw {
		name := names[path]
		results[name] = map[string]Result{}
		for loader, r := range byLoader {
			switch {
			case r.Error != nil:
				results[name][loader] = Result{Err: errors.New(*r.Error)}
			case r.Strings != nil:
				results[name][loader] = Result{Strings: r.Strings}
			default:
				v, err := decodeJSON(r.Docs)
				if err != nil {
					t.Fatalf("%s: PyYAML's documents: %v", name, err)
				}
				docs, _ := v.([]any)
				results[name][loader] = Result{Docs: docs}
			}
		}
	}
	return results
}

// Result is what one loader made of one file: its documents, or an error.
type Result struct {
	Docs []any
	// Strings are those of a Python file's literals.
	Strings []string
	Err     error
}

// All is Python, with each YAML file (a name not ending in ".py") loaded by
// Kubernetes ("kubernetes") and V3 ("yaml.v3") as well.
func All(t testing.TB, files map[string][]byte) map[string]map[string]Result {
	t.Helper()
	results := Python(t, files)
	for name, data := range files {
		if strings.HasSuffix(name, ".py") {
			continue
		}
		docs, err := Kubernetes(data)
		results[name]["kubernetes"] = Result{Docs: docs, Err: err}
		docs, err = V3(data)
		results[name]["yaml.v3"] = Result{Docs: docs, Err: err}
	}
	return results
}

// Loaders names the YAML loaders All uses, Kubernetes' first.
var Loaders = []string{"kubernetes", "yaml.v3", "pyyaml", "libyaml"}
