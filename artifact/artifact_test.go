package artifact_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

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
