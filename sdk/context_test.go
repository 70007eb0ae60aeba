package sdk_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/sdk"
)

func TestPutGet(t *testing.T) {
	dir := t.TempDir()
	a := sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: "f", Step: "a", Index: -1, RunDir: dir,
		Params: map[string]string{"epochs": "3"}})
	if a.Param("epochs") != "3" || a.Param("missing") != "" || a.Item() != "" || a.Index() != -1 {
		t.Errorf("context: param %q, item %q, index %d", a.Param("epochs"), a.Item(), a.Index())
	}
	if err := a.Put("model", map[string]int{"layers": 12}); err != nil {
		t.Fatal(err)
	}
	b := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "b", Index: -1, RunDir: dir})
	var got map[string]int
	if err := b.Get("a", "model", &got); err != nil {
		t.Fatal(err)
	}
	if got["layers"] != 12 {
		t.Errorf("Get = %v", got)
	}
	if err := b.Get("a", "missing", &got); err == nil || !strings.Contains(err.Error(), "no artifact") {
		t.Errorf("Get of a missing artifact: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "a"))
	if len(entries) != 1 || entries[0].Name() != "model.json" {
		t.Errorf("artifact directory holds %v, want only model.json (no temporary files)", entries)
	}
}

func TestPutGetIndex(t *testing.T) {
	dir := t.TempDir()
	for i, item := range []string{"x", "y"} {
		c := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "fan", Item: item, Index: i, RunDir: dir})
		if err := c.Put("out", c.Item()); err != nil {
			t.Fatal(err)
		}
	}
	join := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "join", Index: -1, RunDir: dir})
	var v string
	if err := join.GetIndex("fan", 1, "out", &v); err != nil || v != "y" {
		t.Errorf("GetIndex(1) = %q, %v", v, err)
	}
	if err := join.GetIndex("fan", -1, "out", &v); err == nil {
		t.Error("GetIndex(-1) succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "fan", "0", "out.json")); err != nil {
		t.Errorf("item 0's artifact is not under fan/0: %v", err)
	}
}

func TestArtifactNamesCannotEscape(t *testing.T) {
	c := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "a", Index: -1, RunDir: t.TempDir()})
	for _, name := range []string{"", "../x", "a/b", ".hidden", "-x"} {
		if err := c.Put(name, 1); err == nil {
			t.Errorf("Put(%q) succeeded", name)
		}
	}
	var v int
	if err := c.Get("../a", "x", &v); err == nil {
		t.Error("Get from step ../a succeeded")
	}
}

func TestPutRefusesUnencodableValues(t *testing.T) {
	c := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "a", Index: -1, RunDir: t.TempDir()})
	if err := c.Put("ch", make(chan int)); err == nil {
		t.Error("Put of a channel succeeded")
	}
}

// failing is a store whose every call fails, as an unreachable one would.
type failing struct{ err error }

func (f failing) Put(context.Context, string, []byte) error   { return f.err }
func (f failing) Get(context.Context, string) ([]byte, error) { return nil, f.err }
func (f failing) Location(key string) string                  { return "s3://b/" + key }

// TestStoreErrors: a missing artifact names the step, the item, the artifact and
// where it was looked for; other failures of the store say which artifact.
func TestStoreErrors(t *testing.T) {
	c := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "report", Index: -1, RunDir: t.TempDir()})
	var v string
	err := c.GetIndex("process", 2, "result", &v)
	if err == nil || !strings.Contains(err.Error(), `item 2 of step "process" has no artifact "result" (looked for `) ||
		!strings.Contains(err.Error(), filepath.Join("process", "2", "result.json")) {
		t.Errorf("GetIndex of a missing artifact: %v", err)
	}
	f := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "a", Index: 1, Store: failing{errors.New("connection refused")}})
	if err := f.Put("x", 1); err == nil || err.Error() != `putting artifact "x" of item 1 of step "a": connection refused` {
		t.Errorf("Put through a failing store: %v", err)
	}
	if err := f.Get("b", "y", &v); err == nil || err.Error() != `getting artifact "y" of step "b": connection refused` {
		t.Errorf("Get through a failing store: %v", err)
	}
	if got := f.ArtifactDir(); got != "s3://b/a/1" {
		t.Errorf("ArtifactDir = %q", got)
	}
}

// TestPutPublishes: with Values set, Put writes the artifact's bytes to
// <Values>/<name>.json as well; without, nothing else is written.
func TestPutPublishes(t *testing.T) {
	dir, values := t.TempDir(), t.TempDir()
	c := sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "list", Index: -1, RunDir: dir, Values: values})
	if err := c.Put("shards", []string{"a{{b}}", "c\n\"d\""}); err != nil {
		t.Fatal(err)
	}
	stored, err := os.ReadFile(filepath.Join(dir, "list", "shards.json"))
	if err != nil {
		t.Fatal(err)
	}
	published, err := os.ReadFile(filepath.Join(values, "shards.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(published) != string(stored) {
		t.Errorf("published %q, stored %q", published, stored)
	}
	if entries, _ := os.ReadDir(values); len(entries) != 1 {
		t.Errorf("values directory holds %v, want only shards.json", entries)
	}
	if fi, err := os.Stat(filepath.Join(values, "shards.json")); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != 0o644 {
		t.Errorf("the published file's mode is %v, want 0644: a sidecar of another user reads it", fi.Mode().Perm())
	}
	other := t.TempDir()
	c = sdk.NewContext(context.Background(), sdk.ContextConfig{Step: "list", Index: -1, RunDir: other})
	if err := c.Put("shards", 1); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(values); len(entries) != 1 {
		t.Errorf("a Put without Values wrote %v", entries)
	}
}
