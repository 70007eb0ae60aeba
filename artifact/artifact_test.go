package artifact_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/artifact"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		step  string
		index int
		name  string
		want  string
	}{
		{"prepare", -1, "shards", "prepare/shards.json"},
		{"process", 2, "result", "process/2/result.json"},
	} {
		if got := artifact.Key(tc.step, tc.index, tc.name); got != tc.want {
			t.Errorf("Key(%q, %d, %q) = %q, want %q", tc.step, tc.index, tc.name, got, tc.want)
		}
	}
}

func TestSplitKey(t *testing.T) {
	for _, tc := range []struct {
		key, step, name string
		ok              bool
	}{
		{artifact.Key("prepare", -1, "shards"), "prepare", "shards", true},
		{artifact.Key("process", 2, "result"), "", "", false},
		{"prepare/shards", "", "", false},
		{"prepare/.json", "", "", false},
		{"/shards.json", "", "", false},
		{"shards.json", "", "", false},
	} {
		step, name, ok := artifact.SplitKey(tc.key)
		if step != tc.step || name != tc.name || ok != tc.ok {
			t.Errorf("SplitKey(%q) = %q, %q, %v; want %q, %q, %v", tc.key, step, name, ok, tc.step, tc.name, tc.ok)
		}
	}
}

func TestDir(t *testing.T) {
	dir := artifact.Dir(t.TempDir())
	ctx := context.Background()
	if err := dir.Put(ctx, "process/1/result.json", []byte(`"x"`)); err != nil {
		t.Fatal(err)
	}
	got, err := dir.Get(ctx, "process/1/result.json")
	if err != nil || string(got) != `"x"` {
		t.Errorf("Get = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(string(dir), "process", "1", "result.json")); err != nil {
		t.Errorf("the artifact is not a file of the directory: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(string(dir), "process", "1"))
	if len(entries) != 1 {
		t.Errorf("the directory holds %v, want only the artifact", entries)
	}
	if _, err := dir.Get(ctx, "process/0/result.json"); !artifact.IsNotExist(err) {
		t.Errorf("Get of a missing key: %v, want not exist", err)
	}
	if got, want := dir.Location("process/1"), filepath.Join(string(dir), "process", "1"); got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	for _, key := range []string{"", ".", "..", "../x.json", "/x.json", "a//b.json", "a/./b.json", "a/../../b.json"} {
		if err := dir.Put(ctx, key, nil); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
		if _, err := dir.Get(ctx, key); err == nil {
			t.Errorf("Get(%q) succeeded", key)
		}
	}
}

// TestDirList lists what a step put: its own artifacts, not its items' nor
// other files, with their sizes.
func TestDirList(t *testing.T) {
	root := t.TempDir()
	dir := artifact.Dir(root)
	ctx := context.Background()
	for key, data := range map[string]string{
		"train/model.json":   `{"w": [1, 2, 3]}`,
		"train/metrics.json": `{}`,
		"train/0/part.json":  `1`,
		"other/x.json":       `2`,
	} {
		if err := dir.Put(ctx, key, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	// A Command step's other files and a killed writer's temporary file are no
	// artifacts.
	for _, name := range []string{"notes.txt", ".model.json.123.tmp", ".json"} {
		if err := os.WriteFile(filepath.Join(root, "train", name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := dir.List(ctx, "train")
	if err != nil {
		t.Fatal(err)
	}
	want := []artifact.Entry{{Key: "train/metrics.json", Size: 2}, {Key: "train/model.json", Size: 16}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List(train) (-want +got):\n%s", diff)
	}
	if got, err := dir.List(ctx, "train/0"); err != nil || !cmp.Equal(got, []artifact.Entry{{Key: "train/0/part.json", Size: 1}}) {
		t.Errorf("List(train/0) = %v, %v", got, err)
	}
	if got, err := dir.List(ctx, "never"); err != nil || len(got) != 0 {
		t.Errorf("List(never) = %v, %v; want nothing", got, err)
	}
	if _, err := dir.List(ctx, "../train"); err == nil {
		t.Error("List(../train): no error")
	}
}
