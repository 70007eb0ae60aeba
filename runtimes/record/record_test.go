package record_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/runtimes/record"
)

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// mkdir makes run directory id under a fresh root.
func mkdir(t *testing.T, id string) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

// TestWriteRead writes a cluster run with WriteRecord and WriteTask, and reads
// back what was written: every field, the cluster's included.
func TestWriteRead(t *testing.T) {
	root, dir := mkdir(t, "kube-1")
	rec := record.Record{
		Flow: "train", ID: "kube-1", State: record.Failed, Start: start, End: start.Add(time.Minute), PID: 7,
		Runtime: "kube", Cluster: "https://10.0.0.1:6443", Context: "staging", Namespace: "ml", As: "jobset",
		Params: map[string]string{"epochs": "3"},
		Steps:  []record.StepInfo{{Name: "prepare"}, {Name: "fan", After: []string{"prepare"}, Items: 2}, {Name: "last", After: []string{"fan"}}},
		Error:  "step fan[1] failed",
	}
	written := []record.Task{
		{Step: "prepare", State: record.Succeeded, Attempts: 1, Start: start, End: start.Add(time.Second), ExitCode: new(0),
			Pods: []string{"kube-1-prepare-x"}, Node: "node-a"},
		{Step: "fan", Index: new(1), Item: "b", State: record.Failed, Attempts: 2, Start: start, End: start.Add(time.Minute), ExitCode: new(137),
			Error: "out of memory", Pods: []string{"kube-1-fan-1-x", "kube-1-fan-1-y"}, Node: "node-a,node-b", Reason: "OOMKilled"},
	}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	for _, task := range written {
		if err := record.WriteTask(dir, task); err != nil {
			t.Fatal(err)
		}
	}
	got, tasks, err := record.Read(root, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&rec, got); diff != "" {
		t.Errorf("Read record (-want +got):\n%s", diff)
	}
	// Tasks come in the flow's order; those never written read as pending.
	want := []record.Task{
		written[0],
		{Step: "fan", Index: new(0), State: record.Pending},
		written[1],
		{Step: "last", State: record.Pending},
	}
	if diff := cmp.Diff(want, tasks); diff != "" {
		t.Errorf("Read tasks (-want +got):\n%s", diff)
	}
	task, err := record.ReadTask(dir, "fan", 1)
	if err != nil || !cmp.Equal(written[1], task) {
		t.Errorf("ReadTask(fan, 1) = %+v, %v; want %+v", task, err, written[1])
	}
	// The files are where StateDir says.
	if _, err := os.Stat(filepath.Join(record.StateDir(dir, "fan", 1), record.StateFile)); err != nil {
		t.Error(err)
	}
	runs, err := record.List(root)
	if err != nil || len(runs) != 1 || !cmp.Equal(rec, runs[0]) {
		t.Errorf("List = %+v, %v; want the run", runs, err)
	}
}

// TestLocalJSON: a run without the cluster's fields writes the run.json and
// state.json that local runs always had.
func TestLocalJSON(t *testing.T) {
	_, dir := mkdir(t, "local-1")
	rec := record.Record{Flow: "hello", ID: "local-1", State: record.Succeeded, Start: start, End: start.Add(time.Second), PID: 9,
		Params: map[string]string{"name": "x"}, Steps: []record.StepInfo{{Name: "greet"}}}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	if err := record.WriteTask(dir, record.Task{Step: "greet", State: record.Succeeded, Attempts: 1, Start: start, End: start.Add(time.Second), ExitCode: new(0)}); err != nil {
		t.Fatal(err)
	}
	wantRun := `{
  "flow": "hello",
  "id": "local-1",
  "state": "succeeded",
  "start": "2026-01-02T03:04:05Z",
  "end": "2026-01-02T03:04:06Z",
  "pid": 9,
  "params": {
    "name": "x"
  },
  "steps": [
    {
      "name": "greet"
    }
  ]
}
`
	wantTask := `{
  "step": "greet",
  "state": "succeeded",
  "attempts": 1,
  "start": "2026-01-02T03:04:05Z",
  "end": "2026-01-02T03:04:06Z",
  "exitCode": 0
}
`
	if diff := cmp.Diff(wantRun, readFile(t, dir, "run.json")); diff != "" {
		t.Errorf("run.json (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantTask, readFile(t, record.StateDir(dir, "greet", -1), record.StateFile)); diff != "" {
		t.Errorf("state.json (-want +got):\n%s", diff)
	}
}

func readFile(t *testing.T, path ...string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(path...))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestReadMissing(t *testing.T) {
	root, dir := mkdir(t, "empty")
	if _, err := record.ReadRecord(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadRecord of a directory without run.json: %v, want fs.ErrNotExist", err)
	}
	if _, _, err := record.Read(root, "nope"); err == nil || !strings.Contains(err.Error(), "no run nope in ") {
		t.Errorf("Read of a missing run: %v", err)
	}
	if _, _, err := record.Read(root, "../x"); err == nil {
		t.Error("Read accepted a run ID with a path in it")
	}
	if runs, err := record.List(filepath.Join(root, "none")); err != nil || len(runs) != 0 {
		t.Errorf("List of a missing root: %v, %v", runs, err)
	}
}

func TestStates(t *testing.T) {
	final := map[record.State]bool{
		record.Pending: false, record.Queued: false, record.Running: false, record.Retrying: false,
		record.Succeeded: true, record.Failed: true, record.Skipped: true, record.Interrupted: true, record.Abandoned: true,
	}
	for s, want := range final {
		if s.Final() != want {
			t.Errorf("%s.Final() = %t, want %t", s, s.Final(), want)
		}
	}
}

func TestLabel(t *testing.T) {
	for _, tt := range []struct {
		task record.Task
		want string
	}{
		{record.Task{Step: "a"}, "a"},
		{record.Task{Step: "b", Index: new(3)}, "b[3]"},
	} {
		if got := tt.task.Label(); got != tt.want {
			t.Errorf("Label of %+v = %q, want %q", tt.task, got, tt.want)
		}
	}
}

func TestResumableWithholdsCredentials(t *testing.T) {
	const token = "AbCdEfGhIjKlMnOpQrStUv0123"
	prev := &record.Record{Flow: "f", ID: "r1", Params: map[string]string{"hf-token": token, "epochs": "3"}}
	err := record.Resumable(prev, "f", map[string]string{"hf-token": "XyZ0123456789AbCdEfGhIjK"})
	if err == nil || strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "XyZ0123456789AbCdEfGhIjK") {
		t.Errorf("Resumable = %v, want an error that withholds both tokens", err)
	}
	err = record.Resumable(prev, "f", map[string]string{"epochs": "4"})
	if err == nil || !strings.Contains(err.Error(), "--param epochs=3, not 4") {
		t.Errorf("Resumable = %v, want an error that names both values", err)
	}
}

// TestWriteWithholdsCredentials: what a record's files print of a run (the
// URL it ran at, its errors, a task's reason) withholds what looks like a
// credential; params and items stay as given, as resuming compares them.
func TestWriteWithholdsCredentials(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r1") // a record is read from the directory of its run ID
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := record.Record{Flow: "f", ID: "r1", State: record.Failed, Runtime: "airflow", Cluster: "http://admin:urlpass-42@airflow.internal:8080",
		Error: "step a failed: Authorization: Bearer errtoken-42", Params: map[string]string{"p": "v"}}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	task := record.Task{Step: "a", State: record.Failed, Item: "item", Error: "GET https://u:taskpass-42@h/x: 403", Reason: "token ghp_" + "R4nd0mT0k3nV4lu3Th4tIsThirtySixCh4r5"}
	if err := record.WriteTask(dir, task); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{filepath.Join(dir, "run.json"), filepath.Join(record.StateDir(dir, "a", -1), record.StateFile)} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"urlpass-42", "errtoken-42", "taskpass-42", "R4nd0mT0k3n"} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds %q:\n%s", file, secret, data)
			}
		}
	}
	got, err := record.ReadRecord(dir)
	if err != nil || got.Cluster != "http://admin:xxxxx@airflow.internal:8080" {
		t.Errorf("the record's cluster: %+v, %v; want the URL, its password withheld", got, err)
	}
}
