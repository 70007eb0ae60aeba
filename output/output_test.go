package output_test

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/runtimes/record"
)

const page = "../docs/reference/output.md"

// docs returns an empty document of each kind.
func docs() map[string]any {
	return map[string]any{
		output.KindRunList:    &output.RunList{},
		output.KindRun:        &output.Run{},
		output.KindValidation: &output.Validation{},
		output.KindCheck:      &output.Check{},
	}
}

// TestPageExamples decodes every JSON example of docs/reference/output.md into
// the type of its kind, refusing a field the type does not have; every kind
// has an example, and every field of every type is named on the page.
func TestPageExamples(t *testing.T) {
	data, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?ms)^```json\n(.*?)^```$").FindAllSubmatch(data, -1)
	seen := map[string]bool{}
	for _, b := range blocks {
		var meta output.TypeMeta
		if err := json.Unmarshal(b[1], &meta); err != nil {
			t.Fatalf("%s: an example that is no JSON: %v\n%s", page, err, b[1])
		}
		if meta.APIVersion != output.APIVersion {
			t.Errorf("%s: example of %s: apiVersion %q, want %q", page, meta.Kind, meta.APIVersion, output.APIVersion)
		}
		doc, ok := docs()[meta.Kind]
		if !ok {
			t.Errorf("%s: example of kind %q, which package output has not", page, meta.Kind)
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b[1]))
		dec.DisallowUnknownFields()
		if err := dec.Decode(doc); err != nil {
			t.Errorf("%s: example of %s: %v", page, meta.Kind, err)
		}
		seen[meta.Kind] = true
	}
	for kind, doc := range docs() {
		if !seen[kind] {
			t.Errorf("%s has no example of %s", page, kind)
		}
		for _, name := range fields(reflect.TypeOf(doc).Elem()) {
			if !bytes.Contains(data, []byte("`"+name+"`")) {
				t.Errorf("%s: %s's field %s is not described", page, kind, name)
			}
		}
	}
}

// fields returns the JSON names of the fields of struct type typ, and of the
// structs it holds.
func fields(typ reflect.Type) []string {
	var names []string
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeOf(time.Time{}) {
		return nil
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" {
			names = append(names, name)
		}
		names = append(names, fields(f.Type)...)
	}
	return names
}

// TestNewRun: a run's document holds the record's values, times as given,
// durations in seconds, nodes one by one, and redacts what looks like a
// credential as the table does.
func TestNewRun(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	zero, two := 0, 2
	rec := &record.Record{
		Flow: "f", ID: "r1", State: record.Running, Start: start, Runtime: "kube", Context: "kind-dev",
		Params: map[string]string{"epochs": "3", "token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"},
	}
	tasks := []record.Task{
		{Step: "a", State: record.Succeeded, Attempts: 1, Start: start, End: start.Add(1500 * time.Millisecond), ExitCode: &zero, Node: "n1,n2"},
		{Step: "b", Index: &two, Item: "x", State: record.Pending},
	}
	got := output.NewRun(rec, tasks, start.Add(90*time.Second))
	if got.APIVersion != output.APIVersion || got.Kind != output.KindRun || got.ID != "r1" || got.Runtime != "kube" || got.End != nil {
		t.Errorf("run: %+v", got.RunSummary)
	}
	if got.DurationSeconds == nil || *got.DurationSeconds != 90 {
		t.Errorf("duration of a run that goes on: %v, want 90 seconds so far", got.DurationSeconds)
	}
	if got.Params["epochs"] != "3" || got.Params["token"] == rec.Params["token"] {
		t.Errorf("params %v: want epochs 3 and the token redacted", got.Params)
	}
	a, b := got.Tasks[0], got.Tasks[1]
	if *a.DurationSeconds != 1.5 || !a.Start.Equal(start) || !cmp.Equal(a.Nodes, []string{"n1", "n2"}) || *a.ExitCode != 0 {
		t.Errorf("task a: %+v", a)
	}
	if b.Start != nil || b.DurationSeconds != nil || *b.Index != 2 || b.Item != "x" {
		t.Errorf("task b, not started: %+v", b)
	}
	if l := output.NewRunList(nil, start); l.Items == nil || l.Kind != output.KindRunList {
		t.Errorf("empty list: %+v; want kind RunList and items [], not null", l)
	}
}

// TestWrite: -o yaml is the -o json document, field for field.
func TestWrite(t *testing.T) {
	doc := output.NewCheck(&placement.Report{Cluster: "https://127.0.0.1:6443", NodeCount: 2, Steps: []placement.Placement{{Step: "a", Nodes: 1, Fit: []string{"n1"}, OK: true}}, OK: true})
	var js, ym bytes.Buffer
	if err := output.Write(&js, output.JSON, doc); err != nil {
		t.Fatal(err)
	}
	if err := output.Write(&ym, output.YAML, doc); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML output.Check
	if err := json.Unmarshal(js.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(ym.Bytes(), &fromYAML); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(doc, fromJSON); diff != "" {
		t.Errorf("json round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(fromJSON, fromYAML); diff != "" {
		t.Errorf("yaml differs from json (-json +yaml):\n%s", diff)
	}
	if err := output.Write(&js, "xml", doc); err == nil {
		t.Error("format xml: no error")
	}
}
