package display_test

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/runtimes/display"
)

// lastDrawing returns the lines of the last drawing of the live view in out, and
// what was written after it. Each drawing but the first follows a "clear to the
// end of the screen".
func lastDrawing(out string) []string {
	if i := strings.LastIndex(out, "\x1b[J"); i >= 0 {
		out = out[i+len("\x1b[J"):]
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

func TestPlain(t *testing.T) {
	var stdout, stderr bytes.Buffer
	d := display.New(display.Options{Stdout: &stdout, Stderr: &stderr, Labels: []string{"a", "long[10]"},
		View: func(time.Time) (string, []string, [][]string) {
			t.Error("a plain display drew its view")
			return "", nil, nil
		}})
	d.Start()
	d.Note("run %s", "r1")
	d.Event("a", false, "started")
	d.Output("a", false, "hello")
	d.Output("long[10]", true, "oops")
	d.Output("unknown-and-longer", false, "x")
	d.Stop()
	stamp := `\d\d:\d\d:\d\d\.\d{3} `
	want := regexp.MustCompile(`\A` + stamp + `run r1\n` + stamp + `a: started\n` + stamp + `a        \| hello\n` + stamp + `unknown-and-longer \| x\n\z`)
	if !want.MatchString(stdout.String()) {
		t.Errorf("stdout %q, want it to match %s", stdout.String(), want)
	}
	if !regexp.MustCompile(`\A` + stamp + `long\[10\] \| oops\n\z`).MatchString(stderr.String()) {
		t.Errorf("stderr %q", stderr.String())
	}
}

// TestLive: the header and rows are aligned in columns two spaces apart, the last
// column unpadded, and cut to the terminal's width; important events and output
// go above the view, which is drawn again below them.
func TestLive(t *testing.T) {
	var stdout bytes.Buffer
	view := func(time.Time) (string, []string, [][]string) {
		return "run r1: 1/3 done, 2s", []string{"STEP", "STATE", "NODE", "TIME"}, [][]string{
			{"prepare", "succeeded", "node-a", "1.2s"},
			{"train[0]", "running", "node-bb", ""},
			{"evaluate", "queued", "", "this column is long enough to be cut at the edge"},
		}
	}
	d := display.New(display.Options{Stdout: &stdout, Live: true, Width: 50, Labels: []string{"train[0]"}, View: view, StateColumn: 1})
	d.Start()
	d.Event("train[0]", false, "started")
	d.Output("train[0]", false, "step output")
	d.Event("train[0]", true, "attempt 1 failed")
	d.Stop()
	d.Note("after the view")
	out := stdout.String()
	view1 := strings.Join([]string{
		"run r1: 1/3 done, 2s",
		"  STEP      STATE      NODE     TIME",
		"  prepare   succeeded  node-a   1.2s",
		"  train[0]  running    node-bb",
		"  evaluate  queued              this column is lo",
	}, "\n") + "\n"
	// The view is drawn, cleared (its 5 lines) for the output and the important
	// event, and drawn again below them; it stays when the display stops.
	if !strings.HasPrefix(out, view1+"\x1b[5F\x1b[J") {
		t.Errorf("output does not start with the view, then clear it:\n%q", out)
	}
	if !strings.HasSuffix(out, "\n"+view1+"after the view\n") {
		t.Errorf("output does not end with the view, then the note:\n%q", out)
	}
	for _, l := range strings.Split(view1, "\n") {
		if len([]rune(l)) > 49 {
			t.Errorf("line %q is wider than the terminal", l)
		}
	}
	for _, s := range []string{"train[0] | step output\n", "train[0]: attempt 1 failed\n"} {
		if !strings.Contains(out, "\n"+s) && !strings.Contains(out, "\x1b[J"+s) {
			t.Errorf("output lacks the line %q:\n%q", s, out)
		}
	}
	if strings.Contains(out, "started") {
		t.Errorf("a live display wrote an unimportant event:\n%q", out)
	}
}

// TestLiveTooShort: with more rows than the terminal has room for, the queued,
// running, retrying and failed ones are kept, and one row counts the others.
func TestLiveTooShort(t *testing.T) {
	states := []string{"succeeded", "queued", "pending", "running", "succeeded", "failed", "retrying", "pending", "pending"}
	view := func(time.Time) (string, []string, [][]string) {
		var rows [][]string
		for i, s := range states {
			rows = append(rows, []string{string(rune('a' + i)), "x", s})
		}
		return "run", []string{"STEP", "", "STATE"}, rows
	}
	for _, tt := range []struct {
		height int
		want   []string
	}{
		{8, []string{ // the run's line, the header, 4 kept, 1 counting, and the cursor's
			"run",
			"  STEP       STATE",
			"  b       x  queued",
			"  d       x  running",
			"  f       x  failed",
			"  g       x  retrying",
			"  5 more     2 succeeded, 3 pending",
		}},
		{6, []string{
			"run",
			"  STEP       STATE",
			"  b       x  queued",
			"  d       x  running",
			"  7 more     2 succeeded, 3 pending, 1 failed, 1 retrying",
		}},
		{20, nil},
	} {
		var stdout bytes.Buffer
		d := display.New(display.Options{Stdout: &stdout, Live: true, Width: 200, Height: tt.height, View: view, StateColumn: 2})
		d.Stop()
		got := lastDrawing(stdout.String())
		if tt.want == nil {
			if len(got) != 2+len(states) {
				t.Errorf("height %d: %d lines, want every row:\n%s", tt.height, len(got), strings.Join(got, "\n"))
			}
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("height %d (-want +got):\n%s", tt.height, diff)
		}
	}
}

func TestHuman(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{350*time.Millisecond + 400*time.Microsecond, "350ms"},
		{1234 * time.Millisecond, "1.2s"},
		{3*time.Minute + 4400*time.Millisecond, "3m4s"},
	} {
		if got := display.Human(tt.d); got != tt.want {
			t.Errorf("Human(%s) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	for _, tt := range []struct {
		n    int
		noun string
		want string
	}{
		{1, "step", "1 step"},
		{3, "step", "3 steps"},
		{0, "node", "0 nodes"},
		{1, "process", "1 process"},
		{2, "process", "2 processes"},
	} {
		if got := display.Count(tt.n, tt.noun); got != tt.want {
			t.Errorf("Count(%d, %q) = %q, want %q", tt.n, tt.noun, got, tt.want)
		}
	}
}

// TestCopyPrefixed: CopyPrefixed writes each line of a log as Prefixed makes
// it, with a newline, however long the line (past its buffer of 64 KiB), and
// returns the log's bytes.
func TestCopyPrefixed(t *testing.T) {
	long := strings.Repeat("é", 100_000)
	for _, log := range []string{"", "a", "a\n", "a\n\nb", "\n", long + "\nb\n" + long, "x\r\n" + long + "\n"} {
		var want strings.Builder
		if log != "" {
			for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
				want.WriteString(display.Prefixed("step", 6, line) + "\n")
			}
		}
		var got bytes.Buffer
		n, err := display.CopyPrefixed(&got, strings.NewReader(log), "step", 6)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(len(log)) {
			t.Errorf("%d bytes copied of %d", n, len(log))
		}
		if got.String() != want.String() {
			t.Errorf("CopyPrefixed(%.20q): %.60q, want %.60q", log, got.String(), want.String())
		}
	}
}
