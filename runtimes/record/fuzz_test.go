package record_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// FuzzRead: any run.json, with any state.json for its first step and for that
// step's first item, reads back as a record within compile's bounds that
// writes and reads back the same, or is a short error that says what to do;
// never a panic.
func FuzzRead(f *testing.F) {
	const head = `"flow": "f", "id": "r1", "state": "failed", "start": "2026-01-02T03:04:05Z"`
	for _, seed := range []struct{ run, state string }{
		{`{` + head + `, "steps": [{"name": "a"}]}`, `{"step": "a", "state": "succeeded", "attempts": 1, "exitCode": 0}`},
		{`{` + head + `, "runtime": "kube", "as": "jobset", "cluster": "https://10.0.0.1:6443", "steps": [{"name": "a", "items": 2}, {"name": "b", "after": ["a"]}]}`,
			`{"step": "a", "index": 0, "item": "x", "state": "failed", "attempts": 3, "pods": ["p"], "reason": "OOMKilled"}`},
		{`{"flow": "f", "id": "r1", "state": "running", "runtime": "airflow", "params": {"k": "v"}, "steps": [{"name": "a"}]}`, `{"step": "a", "state": "running"}`},
		{`{` + head + `, "steps": [{"name": "fan", "items": 2000000}]}`, ``},
		{`{` + head + `, "steps": [{"name": "../../x"}]}`, `{"step": "../../x", "state": "failed"}`},
		{`{` + head + `, "steps": [{"name": "a"`, `{"step": "a", "sta`},
		{`{` + head + `, "steps": [{"name": "a", "items": "3"}]}`, `{"step": "a", "attempts": "1"}`},
		{`{` + head + `, "spans": [{"start": "2026-01-02T03:04:05Z", "end": "2026-01-02T03:04:20Z"}, {"start": "2026-01-02T03:11:00Z"}], "steps": [{"name": "a", "stubbed": true}]}`,
			`{"step": "a", "state": "succeeded", "attempts": 0, "stubbed": true}`},
		{`{` + head + `, "spans": [{"start": "2026-01-02T03:04:05Z", "end": "2026-01-02T03:00:00Z"}], "steps": [{"name": "a"}]}`, ``},
		{`{` + head + `, "artifacts": {"url": "/etc"}, "steps": [{"name": "a"}]}`, `{"step": "a", "index": 9, "state": "failed", "attempts": 2000000000}`},
	} {
		f.Add([]byte(seed.run), []byte(seed.state))
	}
	f.Fuzz(func(t *testing.T, runJSON, stateJSON []byte) {
		root := t.TempDir()
		dir := filepath.Join(root, "r1")
		write := func(path string, data []byte) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(filepath.Join(dir, "run.json"), runJSON)
		if len(stateJSON) > 0 {
			// The state of the first step, whichever it is, and of its first item.
			write(filepath.Join(dir, "_steps", "a", "state.json"), stateJSON)
			write(filepath.Join(dir, "_steps", "a", "0", "state.json"), stateJSON)
		}
		rec, tasks, err := record.Read(root, "r1")
		if err != nil {
			if !strings.Contains(err.Error(), "delete the run directory "+dir) {
				t.Fatalf("Read: %v: want an error that says what to do", err)
			}
			if len(err.Error()) > 4096 {
				t.Fatalf("Read: an error of %d bytes: %.200s…", len(err.Error()), err)
			}
			return
		}
		n := 0
		for _, s := range rec.Steps {
			if errs := compile.CheckStepName(nil, s.Name); len(errs) > 0 {
				t.Fatalf("read step %q, which compile refuses: %v", s.Name, errs.ToAggregate())
			}
			for i := range max(s.Items, 1) {
				if n >= len(tasks) {
					t.Fatalf("Read returned %d tasks; the record has more", len(tasks))
				}
				task := tasks[n]
				if task.Step != s.Name || (s.Items > 0) != (task.Index != nil) || (task.Index != nil && *task.Index != i) {
					t.Fatalf("task %d is %s, not item %d of step %s", n, task.Label(), i, s.Name)
				}
				if task.Attempts < 0 || task.Attempts > compile.MaxRetry+1 {
					t.Fatalf("task %s made %d attempts", task.Label(), task.Attempts)
				}
				n++
			}
		}
		if n != len(tasks) || n > compile.MaxTasks {
			t.Fatalf("Read returned %d tasks of a record of %d", len(tasks), n)
		}
		// What was read writes and reads back the same.
		if err := record.WriteRecord(dir, *rec); err != nil {
			t.Fatal(err)
		}
		again, err := record.ReadRecord(dir)
		if err != nil {
			t.Fatalf("reading back what was read: %v", err)
		}
		if diff := cmp.Diff(rec, again); diff != "" {
			t.Fatalf("read back (-first +again):\n%s", diff)
		}
	})
}
