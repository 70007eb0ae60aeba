package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/manifoldflow/manifold/plan"
)

// TestWriteValuesFile: the values file holds, for each value published in
// the directory, its JSON text, its canonical JSON and, for a list (or
// null, a list of none), each element's text as MANIFOLD_ITEM gives it; a
// writer's temporary file is not a value, and no file asked for writes none.
func TestWriteValuesFile(t *testing.T) {
	dir := t.TempDir()
	values := map[string]string{
		"shards": "[\n  \"a\",\n  {\"k\": \"{{ v }}\", \"n\": 1.50},\n  3\n]\n",
		"size":   "\"large\"\n",
		"none":   "null\n",
		"empty":  "[]\n",
	}
	for name, data := range values {
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".publish-123"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeValuesFile(dir, ""); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "xcom", "return.json")
	if err := writeValuesFile(dir, file); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]plan.PublishedValue
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]plan.PublishedValue{
		"shards": {JSON: values["shards"], Canonical: `["a",{"k":"{{ v }}","n":1.5},3]`, Items: []string{"a", `{"k":"{{ v }}","n":1.50}`, "3"}},
		"size":   {JSON: values["size"], Canonical: `"large"`},
		"none":   {JSON: values["none"], Canonical: "null", Items: []string{}},
		"empty":  {JSON: values["empty"], Canonical: "[]", Items: []string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values file (-want +got):\n%s", diff)
	}
	if err := writeValuesFile("", file); err == nil {
		t.Error("a values file without MANIFOLD_VALUES: no error")
	}
}
