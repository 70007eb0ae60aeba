package local_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestResumedRunTook: a run that failed, resumed 7 minutes after its first
// runner ended, took the time its runners ran it (here 15 s, and what the
// resume takes), not the 7 minutes between them: in its summary, in run.json,
// and in the time of its next resume. A runner killed before it recorded its
// end (its run abandoned) ran until the last time its steps recorded.
func TestResumedRunTook(t *testing.T) {
	for _, tt := range []struct {
		name      string
		abandoned bool
	}{{"failed", false}, {"abandoned", true}} {
		t.Run(tt.name, func(t *testing.T) {
			broken := filepath.Join(t.TempDir(), "broken")
			if err := os.WriteFile(broken, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			flow := sdk.NewFlow("tookflow", sdk.Image("registry.example.com/took:v1"), sdk.Env("BROKEN", broken)).
				Step("first", sdk.Command("true")).
				Step("second", sdk.After("first"), sdk.Command("sh", "-c", `test ! -e "$BROKEN"`))
			root := t.TempDir()
			p := compileFlow(t, flow, nil)
			if r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "r1"}); r.err == nil {
				t.Fatal("the first run succeeded")
			}
			// The first runner ran 15 s, and ended 7 minutes ago.
			dir := filepath.Join(root, "r1")
			start := time.Now().UTC().Add(-7*time.Minute - 15*time.Second).Truncate(time.Second)
			rec, err := record.ReadRecord(dir)
			if err != nil {
				t.Fatal(err)
			}
			rec.Start, rec.End = start, start.Add(15*time.Second)
			if tt.abandoned {
				rec.State, rec.End = record.Running, time.Time{}
			}
			writeJSON(t, filepath.Join(dir, "run.json"), rec)
			for _, step := range []string{"first", "second"} {
				task, err := record.ReadTask(dir, step, -1)
				if err != nil {
					t.Fatal(err)
				}
				task.Start, task.End = start.Add(5*time.Second), start.Add(15*time.Second)
				if err := record.WriteTask(dir, task); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Remove(broken); err != nil {
				t.Fatal(err)
			}

			for i := range 2 {
				r := runPlan(t, t.Context(), p, local.Options{Root: root, RunID: "r1"})
				if r.err != nil {
					t.Fatalf("resume %d: %v\n%s", i+1, r.err, r.stdout)
				}
				m := regexp.MustCompile(`run r1 succeeded in (\S+)\n`).FindStringSubmatch(r.stdout)
				if m == nil {
					t.Fatalf("resume %d: no summary:\n%s", i+1, r.stdout)
				}
				took, err := time.ParseDuration(m[1])
				if err != nil {
					t.Fatal(err)
				}
				if took < 15*time.Second || took > time.Minute {
					t.Errorf("resume %d: the run took %s, want 15s and what the resumes took, not the idle minutes", i+1, took)
				}
				rec, err := record.ReadRecord(dir)
				if err != nil {
					t.Fatal(err)
				}
				if !rec.Start.Equal(start) {
					t.Errorf("resume %d: run.json starts at %s, want the first runner's start %s", i+1, rec.Start, start)
				}
				if got := rec.Took(rec.End); got < 15*time.Second || got > time.Minute {
					t.Errorf("resume %d: run.json says the run took %s (spans %+v)", i+1, got, rec.Spans)
				}
				if strings.Contains(r.stdout, "7m") {
					t.Errorf("resume %d: the output counts the idle minutes:\n%s", i+1, r.stdout)
				}
			}
		})
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
