package sdk_test

import (
	"context"
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
