package record_test

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// writeRun writes run.json of run id under a fresh root as given, byte for byte.
func writeRun(t *testing.T, id, runJSON string) (root, dir string) {
	t.Helper()
	root, dir = mkdir(t, id)
	if err := os.WriteFile(filepath.Join(dir, "run.json"), []byte(runJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

// wantBad checks that err refuses the record, naming the file and the field,
// and saying what to do.
func wantBad(t *testing.T, err error, file, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("read a damaged record; want an error naming %s and %s", file, field)
	}
	for _, want := range []string{file, field, "delete the run directory"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q: want it to name %q", err, want)
		}
	}
}

// TestReadHugeItems: a record claiming two million foreach items is refused
// before anything is made for them.
func TestReadHugeItems(t *testing.T) {
	root, dir := writeRun(t, "r1", `{"flow": "f", "id": "r1", "state": "succeeded", "start": "2026-01-02T03:04:05Z",
		"steps": [{"name": "fan", "items": 2000000}]}`)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := record.Read(root, "r1")
	runtime.ReadMemStats(&after)
	wantBad(t, err, filepath.Join(dir, "run.json"), "steps[0].items")
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("reading the record allocated %d bytes; want under 1 MiB", n)
	}
}

// TestReadStepOutsideRun: a step named ../../x in a record reads nothing
// outside the run directory.
func TestReadStepOutsideRun(t *testing.T) {
	root, dir := writeRun(t, "r1", `{"flow": "f", "id": "r1", "state": "succeeded", "start": "2026-01-02T03:04:05Z",
		"steps": [{"name": "../../x"}]}`)
	// _steps/../../x of the run directory is x beside it.
	outside := filepath.Join(root, "x")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	const sentinel = "SENTINEL-OUTSIDE-THE-RUN"
	if err := os.WriteFile(filepath.Join(outside, "state.json"), []byte(`{"step": "../../x", "state": "failed", "error": "`+sentinel+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	rec, tasks, err := record.Read(root, "r1")
	wantBad(t, err, filepath.Join(dir, "run.json"), "steps[0].name")
	if strings.Contains(err.Error(), sentinel) || rec != nil || tasks != nil {
		t.Errorf("Read = %+v, %+v, %v: read the file outside the run", rec, tasks, err)
	}
	if _, err := record.ReadTask(dir, "../../x", -1); err == nil {
		t.Error("ReadTask read a step named ../../x")
	} else if strings.Contains(err.Error(), sentinel) {
		t.Errorf("ReadTask: %v: read the file outside the run", err)
	}
}

// TestReadDamaged: truncated JSON, wrong types and values no runner writes are
// each an error naming the file and the field.
func TestReadDamaged(t *testing.T) {
	const head = `"flow": "f", "id": "r1", "state": "succeeded", "start": "2026-01-02T03:04:05Z"`
	for _, tt := range []struct {
		name, json, field string
	}{
		{"truncated", `{` + head + `, "steps": [{"name": "a"`, "run.json"},
		{"empty", ``, "run.json"},
		{"not an object", `[1, 2]`, "run.json"},
		{"items is a string", `{` + head + `, "steps": [{"name": "a", "items": "3"}]}`, "steps.items"},
		{"steps is an object", `{` + head + `, "steps": {"name": "a"}}`, "steps"},
		{"negative items", `{` + head + `, "steps": [{"name": "a", "items": -1}]}`, "steps[0].items"},
		{"huge items", `{` + head + `, "steps": [{"name": "a", "items": 1e300}]}`, "steps.items"},
		{"flow", `{"flow": "F/x", "id": "r1", "state": "succeeded", "steps": [{"name": "a"}]}`, "flow"},
		{"no flow", `{"id": "r1", "state": "succeeded", "steps": [{"name": "a"}]}`, "flow"},
		{"other id", `{"flow": "f", "id": "r2", "state": "succeeded", "steps": [{"name": "a"}]}`, "id"},
		{"state", `{"flow": "f", "id": "r1", "state": "exploded", "steps": [{"name": "a"}]}`, "state"},
		{"runtime", `{` + head + `, "runtime": "../x", "steps": [{"name": "a"}]}`, "runtime"},
		{"duplicate step", `{` + head + `, "steps": [{"name": "a"}, {"name": "a"}]}`, "steps[1].name"},
		{"after unknown", `{` + head + `, "steps": [{"name": "a", "after": ["b"]}]}`, "steps[0].after[0]"},
		{"after itself", `{` + head + `, "steps": [{"name": "a", "after": ["a"]}]}`, "steps[0].after[0]"},
		{"tasks in all", `{` + head + `, "steps": [{"name": "a", "items": 60000}, {"name": "b", "items": 60000}]}`, "steps"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := writeRun(t, "r1", tt.json)
			_, _, err := record.Read(root, "r1")
			wantBad(t, err, filepath.Join(dir, "run.json"), tt.field)
		})
	}
}

// TestReadDamagedTask: a state.json that is not its task's is refused, naming
// the file and the field.
func TestReadDamagedTask(t *testing.T) {
	for _, tt := range []struct {
		name, json, field string
	}{
		{"truncated", `{"step": "fan", "index": 1, "state": "succ`, "state.json"},
		{"wrong type", `{"step": "fan", "index": 1, "state": "succeeded", "attempts": "1"}`, "attempts"},
		{"other step", `{"step": "other", "index": 1, "state": "succeeded"}`, "step"},
		{"other index", `{"step": "fan", "index": 7, "state": "succeeded"}`, "index"},
		{"no index", `{"step": "fan", "index": null, "state": "succeeded"}`, "index"},
		{"state", `{"step": "fan", "index": 1, "state": "exploded"}`, "state"},
		{"negative attempts", `{"step": "fan", "index": 1, "state": "failed", "attempts": -1}`, "attempts"},
		{"huge attempts", `{"step": "fan", "index": 1, "state": "failed", "attempts": 2000000000}`, "attempts"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := writeRun(t, "r1", `{"flow": "f", "id": "r1", "state": "failed", "start": "2026-01-02T03:04:05Z",
				"steps": [{"name": "fan", "items": 2}]}`)
			state := filepath.Join(record.StateDir(dir, "fan", 1), "state.json")
			if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(state, []byte(tt.json), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := record.Read(root, "r1")
			wantBad(t, err, state, tt.field)
			// ReadTask returns nothing of what the file held.
			task, err := record.ReadTask(dir, "fan", 1)
			wantBad(t, err, state, tt.field)
			if want := (record.Task{Step: "fan", Index: new(1), State: record.Pending}); !cmp.Equal(want, task) {
				t.Errorf("ReadTask = %+v, %v; want the task as pending", task, err)
			}
		})
	}
}

// TestReadHugeFile: a run.json or state.json far larger than any runner writes
// is refused without reading it whole.
func TestReadHugeFile(t *testing.T) {
	root, dir := writeRun(t, "r1", `{"flow": "f", "id": "r1", "state": "succeeded", "steps": [{"name": "a"}]}`)
	// A gigabyte of spaces after the record, written as a hole.
	if err := os.Truncate(filepath.Join(dir, "run.json"), 1<<30); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _, err := record.Read(root, "r1")
	runtime.ReadMemStats(&after)
	wantBad(t, err, filepath.Join(dir, "run.json"), "larger than")
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("reading the record allocated %d bytes; want under 1 MiB", n)
	}
}

// TestReadValid: what runners write reads back, an engine's run ID included.
func TestReadValid(t *testing.T) {
	const id = "manual__2026-12-02T14:20:32.669649+00:00"
	root, _ := writeRun(t, id, `{"flow": "f", "id": "`+id+`", "state": "failed", "runtime": "airflow",
		"steps": [{"name": "a"}, {"name": "fan", "after": ["a"], "items": 3}]}`)
	rec, err := record.ReadRecord(filepath.Join(root, id))
	if err != nil || rec.ID != id || len(rec.Steps) != 2 {
		t.Errorf("ReadRecord = %+v, %v", rec, err)
	}
	rec, tasks, err := record.Read(root, id)
	if err != nil || rec.ID != id || len(tasks) != 4 {
		t.Errorf("Read(%s) = %+v, %v, %v", id, rec, tasks, err)
	}
	// A run of this machine has a run ID that Check takes.
	root, _ = writeRun(t, id, `{"flow": "f", "id": "`+id+`", "state": "failed", "steps": [{"name": "a"}]}`)
	_, err = record.ReadRecord(filepath.Join(root, id))
	wantBad(t, err, "run.json", "id")
}

// TestReadLongValue: an error shows the start of a long value, not all of it.
func TestReadLongValue(t *testing.T) {
	long := strings.Repeat("A", 1<<20)
	root, dir := writeRun(t, "r1", `{"flow": "`+long+`", "id": "r1", "state": "succeeded", "steps": [{"name": "a"}]}`)
	_, _, err := record.Read(root, "r1")
	wantBad(t, err, filepath.Join(dir, "run.json"), "flow")
	if len(err.Error()) > 2000 {
		t.Errorf("an error of %d bytes: %.200s…", len(err.Error()), err)
	}
}

// TestReadDenseFile: a file within the size bound but packed with values
// (millions of steps, an after list of millions, millions of params or pods),
// or with a million errors, is refused without making them all.
func TestReadDenseFile(t *testing.T) {
	const head = `"flow": "f", "id": "r1", "state": "succeeded"`
	// Some 12 MiB of item, within the size bound of either file.
	dense := func(item string) string { return strings.Repeat(item+",", (12<<20)/(len(item)+1)) + item }
	for _, tt := range []struct {
		name, run, state, field string
	}{
		{"steps", `{` + head + `, "steps": [` + dense(`{"name":"a"}`) + `]}`, "", "values"},
		{"after", `{` + head + `, "steps": [{"name": "a"}, {"name": "b", "after": [` + dense(`"a"`) + `]}]}`, "", "values"},
		{"unknown after", `{` + head + `, "steps": [{"name": "a", "after": [` + strings.Repeat(`"b",`, 1<<19) + `"b"]}]}`, "", "steps[0].after[0]"},
		{"params", `{` + head + `, "params": {` + dense(`"a":""`) + `}, "steps": [{"name": "a"}]}`, "", "values"},
		{"pods", `{` + head + `, "steps": [{"name": "a"}]}`, `{"step": "a", "state": "failed", "pods": [` + dense(`""`) + `]}`, "values"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root, dir := writeRun(t, "r1", tt.run)
			file := filepath.Join(dir, "run.json")
			if tt.state != "" {
				file = filepath.Join(record.StateDir(dir, "a", -1), "state.json")
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(tt.state), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, err := record.Read(root, "r1")
			runtime.ReadMemStats(&after)
			wantBad(t, err, file, tt.field)
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
				t.Errorf("reading the record allocated %d MiB; want under 64 MiB", n>>20)
			}
		})
	}
}

// TestReadLargest: the largest record a flow makes, compile.MaxTasks steps
// each after the one before, reads back.
func TestReadLargest(t *testing.T) {
	root, dir := mkdir(t, "r1")
	rec := record.Record{Flow: "f", ID: "r1", State: record.Succeeded, Params: map[string]string{"epochs": "3"}}
	for i := range compile.MaxTasks {
		s := record.StepInfo{Name: "step-" + strconv.Itoa(i)}
		if i > 0 {
			s.After = []string{rec.Steps[i-1].Name}
		}
		rec.Steps = append(rec.Steps, s)
	}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	got, tasks, err := record.Read(root, "r1")
	if err != nil || len(got.Steps) != compile.MaxTasks || len(tasks) != compile.MaxTasks {
		t.Fatalf("Read: %v", err)
	}
}

// TestReadSpanEndingBeforeItsStart: a runner's span that ends before it
// starts is no span a runner records.
func TestReadSpanEndingBeforeItsStart(t *testing.T) {
	root, dir := writeRun(t, "r1", `{"flow": "f", "id": "r1", "state": "succeeded", "start": "2026-01-02T03:04:05Z",
		"spans": [{"start": "2026-01-02T03:04:05Z", "end": "2026-01-02T03:04:20Z"}, {"start": "2026-01-02T03:11:00Z", "end": "2026-01-02T03:10:00Z"}],
		"steps": [{"name": "a"}]}`)
	_, _, err := record.Read(root, "r1")
	wantBad(t, err, filepath.Join(dir, "run.json"), "spans[1].end")
}

// TestTook: a resumed run took the sum of its runners' spans, the last one
// to now while it goes on; a run never resumed, from its start to its end.
func TestTook(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, "2026-01-02T"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tt := range []struct {
		name string
		rec  record.Record
		now  time.Time
		want time.Duration
	}{
		{"once", record.Record{Start: at("10:00:00"), End: at("10:00:15")}, at("11:00:00"), 15 * time.Second},
		{"running", record.Record{Start: at("10:00:00")}, at("10:00:30"), 30 * time.Second},
		{"resumed", record.Record{Start: at("10:00:00"), End: at("10:07:05"),
			Spans: []record.Span{{Start: at("10:00:00"), End: at("10:00:15")}, {Start: at("10:07:00"), End: at("10:07:05")}}}, at("11:00:00"), 20 * time.Second},
		{"resumed-running", record.Record{Start: at("10:00:00"),
			Spans: []record.Span{{Start: at("10:00:00"), End: at("10:00:15")}, {Start: at("10:07:00")}}}, at("10:07:10"), 25 * time.Second},
	} {
		if got := tt.rec.Took(tt.now); got != tt.want {
			t.Errorf("%s: took %s, want %s", tt.name, got, tt.want)
		}
	}
}
