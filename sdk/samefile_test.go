package sdk

import (
	"path/filepath"
	"testing"

	"github.com/manifoldflow/manifold/artifact"
)

// TestSameFile: a value is not published again where the store already put
// it (a directory store, the values in the step's own directory, as the
// local runner points them), and is everywhere else.
func TestSameFile(t *testing.T) {
	run := t.TempDir()
	key := artifact.Key("list", -1, "shards")
	for _, c := range []struct {
		store artifact.Store
		path  string
		want  bool
	}{
		{artifact.Dir(run), filepath.Join(run, "list", "shards.json"), true},
		{artifact.Dir(run + "/"), filepath.Join(run, "list", "shards.json"), true},
		{artifact.Dir(run), filepath.Join(run, "values", "shards.json"), false},
		{artifact.Dir(t.TempDir()), filepath.Join(run, "list", "shards.json"), false},
		{nil, filepath.Join(run, "list", "shards.json"), false},
	} {
		if got := sameFile(c.store, key, c.path); got != c.want {
			t.Errorf("sameFile(%v, %q, %q) = %v, want %v", c.store, key, c.path, got, c.want)
		}
	}
}
