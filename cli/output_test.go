package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/output"
)

// cmdDecode decodes the last command's standard output as a document of
// package output: `decode json|yaml KIND FILE`. The document must be of that
// apiVersion and kind and hold no field its type does not; FILE gets the
// decoded value, one `path=value` line per field (items[0].id=one), for grep.
func cmdDecode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: decode json|yaml KIND FILE")
	}
	data := []byte(ts.ReadFile("stdout"))
	if args[0] == output.YAML {
		var err error
		data, err = yaml.YAMLToJSON(data)
		ts.Check(err)
	} else if args[0] != output.JSON {
		ts.Fatalf("decode %s: json or yaml", args[0])
	}
	docs := map[string]any{
		output.KindRunList: &output.RunList{}, output.KindRun: &output.Run{},
		output.KindValidation: &output.Validation{}, output.KindCheck: &output.Check{},
	}
	doc, ok := docs[args[1]]
	if !ok {
		ts.Fatalf("decode: no kind %s", args[1])
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc); err != nil {
		ts.Fatalf("decoding stdout as %s: %v", args[1], err)
	}
	if dec.More() {
		ts.Fatalf("stdout holds more than one document")
	}
	canon, err := json.Marshal(doc)
	ts.Check(err)
	var v any
	ts.Check(json.Unmarshal(canon, &v))
	if m := v.(map[string]any); m["apiVersion"] != output.APIVersion || m["kind"] != args[1] {
		ts.Fatalf("apiVersion %v, kind %v; want %s, %s", m["apiVersion"], m["kind"], output.APIVersion, args[1])
	}
	var lines []string
	flatten("", v, &lines)
	sort.Strings(lines)
	ts.Check(writeFile(ts, args[2], strings.Join(lines, "\n")+"\n"))
}

func writeFile(ts *testscript.TestScript, name, text string) error {
	return os.WriteFile(ts.MkAbs(name), []byte(text), 0o644)
}

// flatten appends a `path=value` line for every scalar in v.
func flatten(path string, v any, lines *[]string) {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		for _, k := range slices.Sorted(slices.Values(keys)) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, v[k], lines)
		}
	case []any:
		for i, e := range v {
			flatten(fmt.Sprintf("%s[%d]", path, i), e, lines)
		}
	default:
		*lines = append(*lines, fmt.Sprintf("%s=%v", path, v))
	}
}
