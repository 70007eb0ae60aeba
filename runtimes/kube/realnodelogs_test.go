package kube_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/loglines"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// recordedLines reads the lines that a cluster run recorded for step (each
// labelled with it, long lines in pieces) and joins them back.
func recordedLines(t *testing.T, dir, step string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(record.StateDir(dir, step, -1), record.StdoutLog))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prefix := display.Prefixed(step, 0, "")
	var pieces []string
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			text, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), prefix)
			if !ok {
				t.Fatalf("a line of %s's log without its label: %.80q", step, line)
			}
			pieces = append(pieces, text)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return loglines.Joined(pieces)
}

// runKube runs flow f with o (its output to out), with a record under root.
func runKube(t *testing.T, ctx context.Context, f *sdk.Flow, o kube.Options, out io.Writer) (*kube.Result, error) {
	t.Helper()
	o.Stdout, o.Stderr = out, out
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	return kube.Run(ctx, compileFlow(t, f), o)
}

// TestRealLongLogLine: a container on a real node prints a line of 5 MiB (past
// the 4 MiB a log line could be, with no newline for all of it, as a progress
// bar redraws itself) and lines after it; the run follows its log to the end,
// and the record holds the long line, in pieces that join into it, and the
// lines after it.
func TestRealLongLogLine(t *testing.T) {
	c := simcluster.Shared(t)
	c.RealNode(t)
	c.PushBusybox(t, "busybox:1.37")
	const size = 5 << 20
	f := realNodeFlow("real-longline").
		Step("bar", sdk.Command("sh", "-c", fmt.Sprintf(`echo before; head -c %d /dev/zero | tr '\0' '#'; echo; echo after-1; echo after-2`, size)))
	root := t.TempDir()
	o := options(c, c.Namespace(t), root)
	o.RunID = "real-longline"
	var out syncBuffer
	res, err := runKube(t, context.Background(), f, o, &out)
	if err != nil || res.State != record.Succeeded {
		t.Fatalf("run: %v (%v); output:\n%.2000s", err, res, out.String())
	}
	got := recordedLines(t, filepath.Join(root, o.RunID), "bar")
	want := []string{"before", strings.Repeat("#", size), "after-1", "after-2"}
	if len(got) != len(want) {
		t.Errorf("the record holds %d lines of bar's log, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, loglines.Short(got[i]), loglines.Short(want[i]))
		}
	}
}

// TestRealLogAcrossAPIServerRestart: on a cluster of its own, with a real
// node, a container prints 400 numbered lines (and a long one among them) over
// about 30 seconds, and the API server is restarted while it does, cutting the
// log's stream. The run succeeds, and its record holds every line once, in
// order: the stream was opened again where it stopped.
func TestRealLogAcrossAPIServerRestart(t *testing.T) {
	c := simcluster.Dedicated(t, simcluster.Options{})
	c.RealNode(t)
	c.PushBusybox(t, "busybox:1.37")
	const n, long = 400, 200_000
	f := realNodeFlow("real-logrestart").
		Step("count", sdk.Command("sh", "-c", fmt.Sprintf(
			`i=0; while [ $i -lt %d ]; do if [ $i -eq 150 ]; then head -c %d /dev/zero | tr '\0' '='; echo; fi; echo "line $i"; i=$((i+1)); sleep 0.07; done`, n, long)))
	root := t.TempDir()
	o := options(c, c.Namespace(t), root)
	o.RunID = "real-logrestart"
	out := &syncBuffer{}
	type result struct {
		res *kube.Result
		err error
	}
	ended := make(chan result, 1)
	go func() {
		res, err := runKube(t, context.Background(), f, o, out)
		ended <- result{res, err}
	}()
	log := filepath.Join(record.StateDir(filepath.Join(root, o.RunID), "count", -1), record.StdoutLog)
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if data, _ := os.ReadFile(log); strings.Contains(string(data), "| line 20\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("count's log did not reach line 20; output:\n%s", out.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Restart(ctx, simcluster.APIServer); err != nil {
		t.Fatal(err)
	}
	r := <-ended
	var said []string
	for _, line := range strings.Split(out.String(), "\n") {
		if !strings.Contains(line, "count | ") {
			said = append(said, line)
		}
	}
	t.Logf("what the run said, but for count's log:\n%s", strings.Join(said, "\n"))
	if r.err != nil || r.res.State != record.Succeeded {
		t.Fatalf("run: %v", r.err)
	}
	if !strings.Contains(out.String(), "lost the API server") {
		t.Errorf("the run did not lose the API server: the restart cut nothing")
	}
	var want []string
	for i := range n {
		if i == 150 {
			want = append(want, strings.Repeat("=", long))
		}
		want = append(want, "line "+strconv.Itoa(i))
	}
	got := recordedLines(t, filepath.Join(root, o.RunID), "count")
	if len(got) != len(want) {
		t.Errorf("the record holds %d lines of count's log, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, loglines.Short(got[i]), loglines.Short(want[i]))
			break
		}
	}
}
