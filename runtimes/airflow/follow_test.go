package airflow

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestMissedRetry: a try that failed and that Airflow retried between two
// looks (the follower, having seen try 1 running, next sees try 2) is told as
// a failed attempt being retried (dag.Run.Retried), its log kept in the unit's
// record, before what the second look shows of try 2; the record counts both
// attempts. A retry the follower saw is told once.
func TestMissedRetry(t *testing.T) {
	p := testflows.Compile(t, sdk.NewFlow("retryflow", sdk.Image("registry.example.com/r:v1")).
		Step("a", sdk.Command("true"), sdk.Retry(2)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/api/v2/dags/retryflow/dagRuns/r1/taskInstances/a/logs/") {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		try := filepath.Base(r.URL.Path)
		_, _ = w.Write([]byte(`{"content": ["try ` + try + ` begins", {"event": "failed", "level": "error",
			"error_detail": [{"exc_type": "AirflowException", "exc_value": "try ` + try + ` failed"}]}]}`))
	}))
	defer srv.Close()
	c, err := New(Config{URL: srv.URL, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	start1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start2 := start1.Add(time.Minute)
	// look is what one look sees of task a: try's state.
	type look struct {
		try   int
		state string
	}
	running1 := "a: try 1 of task a running"
	failed1 := "a: attempt 1 failed: task a failed in try 1: AirflowException: try 1 failed; retrying"
	running2 := "a: try 2 of task a running"
	for _, tt := range []struct {
		name         string
		looks        []look
		wantState    record.State
		wantAttempts int
		wantLines    []string
	}{
		{"running", []look{{1, "running"}, {2, "running"}}, record.Running, 2, []string{running1, failed1, running2}},
		{"up for retry", []look{{1, "running"}, {2, "up_for_retry"}}, record.Retrying, 2, []string{running1, failed1, running2,
			"a: attempt 2 failed: task a failed in try 2: AirflowException: try 2 failed; retrying"}},
		{"succeeded", []look{{1, "running"}, {2, "success"}}, record.Succeeded, 2, []string{running1, failed1, running2, "a: succeeded in 1m0s"}},
		{"failed", []look{{1, "running"}, {2, "failed"}}, record.Failed, 2, []string{running1, failed1, running2,
			"a: failed after 2 attempts: task a failed in try 2: AirflowException: try 2 failed"}},
		// A retry seen is not told again when the next try is.
		{"seen", []look{{1, "running"}, {1, "up_for_retry"}, {2, "running"}}, record.Running, 2, []string{running1, failed1, running2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			fl := newFollower(c, p, "retryflow", "r1", t.TempDir(), FollowOptions{}.withDefaults())
			fl.r.Disp = display.New(display.Options{Stdout: &out, Now: func() time.Time { return start1 }})
			u := fl.units[0]
			for _, l := range tt.looks {
				ti := TaskInstance{TaskID: "a", MapIndex: -1, State: &l.state, TryNumber: l.try, StartDate: &start1}
				if l.try == 2 {
					ti.StartDate, ti.EndDate = &start2, &start2
				}
				if !fl.applyOne(t.Context(), u, &ti, "") {
					t.Errorf("try %d %s: no change told", l.try, l.state)
				}
			}
			fl.r.Disp.Stop()

			var lines []string
			for l := range strings.Lines(out.String()) {
				lines = append(lines, strings.TrimPrefix(strings.TrimSuffix(l, "\n"), "03:04:05.000 "))
			}
			if diff := cmp.Diff(tt.wantLines, lines); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			got := fl.r.Task(u.Unit)
			if got.State != tt.wantState || got.Attempts != tt.wantAttempts || !got.Start.Equal(start1) {
				t.Errorf("task %s, %d attempts, start %v; want %s, %d, %v", got.State, got.Attempts, got.Start, tt.wantState, tt.wantAttempts, start1)
			}
			log, err := os.ReadFile(filepath.Join(record.StateDir(fl.r.Dir, "a", -1), record.StdoutLog))
			if err != nil {
				t.Fatal(err)
			}
			if want := record.AttemptMarker(1, start1) + "try 1 begins\n"; !strings.HasPrefix(string(log), want) {
				t.Errorf("stdout.log begins %q, want the log of try 1, %q", log, want)
			}
		})
	}
}
