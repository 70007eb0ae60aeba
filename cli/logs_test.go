package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// bigLogRun records, in the working directory, a run of two steps whose
// stdout.log holds about size bytes each: lines of 100 bytes, and every 64th
// of long bytes. It returns the flow and the run's ID.
func bigLogRun(t testing.TB, size, long int) (*sdk.Flow, string) {
	t.Helper()
	flow := sdk.NewFlow("biglog", sdk.Image("example.com/biglog:v1")).
		Step("a", sdk.Command("a")).
		Step("b", sdk.Command("b"), sdk.After("a"))
	const id = "biglog-1"
	dir, lk, err := record.Open(record.DefaultRoot, id)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	now := time.Now().UTC()
	rec := record.Record{Flow: "biglog", ID: id, State: record.Succeeded, Start: now, End: now,
		Steps: []record.StepInfo{{Name: "a"}, {Name: "b", After: []string{"a"}}}}
	if err := record.WriteRecord(dir, rec); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"a", "b"} {
		if err := record.WriteTask(dir, record.Task{Step: step, State: record.Succeeded, Attempts: 1, Start: now, End: now}); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(record.StateDir(dir, step, -1), record.StdoutLog))
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriterSize(f, 1<<20)
		short := strings.Repeat("s", 99) + "\n"
		for n, i := 0, 0; n < size; i++ {
			if i%64 == 0 {
				for k := 0; k < long; k += len(short) - 1 {
					w.WriteString(short[:min(len(short)-1, long-k)])
				}
				w.WriteByte('\n')
				n += long + 1
				continue
			}
			w.WriteString(short)
			n += len(short)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return flow, id
}

// lineCheck counts the bytes and lines written to it, and the lines that do
// not begin with one of the prefixes, holding no line.
type lineCheck struct {
	prefixes []string
	bytes    int64
	lines    int
	bad      int
	start    bool
	head     []byte // the start of the line being written
}

func (c *lineCheck) Write(p []byte) (int, error) {
	c.bytes += int64(len(p))
	for _, b := range p {
		if c.start {
			c.head, c.start = c.head[:0], false
		}
		if len(c.head) < 16 {
			c.head = append(c.head, b)
			if len(c.head) == 16 {
				c.checkHead()
			}
		}
		if b == '\n' {
			if len(c.head) < 16 {
				c.checkHead()
			}
			c.lines++
			c.start = true
		}
	}
	return len(p), nil
}

func (c *lineCheck) checkHead() {
	for _, p := range c.prefixes {
		if bytes.HasPrefix(c.head, []byte(p)) {
			return
		}
	}
	c.bad++
}

// TestLogsBoundedMemory: logs prints a run's 2 × 64 MiB of recorded output, in
// lines up to 8 MiB long, each prefixed with its step, allocating at most
// 16 MiB for it: it streams the logs, and holds no log, nor line, whole.
func TestLogsBoundedMemory(t *testing.T) {
	t.Chdir(t.TempDir())
	const size = 64 << 20
	flow, id := bigLogRun(t, size, 8<<20)
	out := &lineCheck{prefixes: []string{"a | ", "b | "}, start: true}
	var errOut bytes.Buffer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := Run(context.Background(), flow, []string{"biglog", "logs", id}, out, &errOut)
	runtime.ReadMemStats(&after)
	if code != 0 {
		t.Fatalf("logs: exit %d: %s", code, errOut.String())
	}
	if out.bytes < 2*size || out.bad > 0 {
		t.Fatalf("logs printed %d bytes in %d lines, %d without their step's label; want 2 × %d bytes, each line labelled", out.bytes, out.lines, out.bad, size)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
		t.Errorf("logs of 2 × %d MiB allocated %d MiB, want at most 16", size>>20, alloc>>20)
	}
}

// BenchmarkLogs prints a run's 2 × 16 MiB of recorded output with lines up to
// 4 MiB long, and reports the bytes allocated per MiB of log.
func BenchmarkLogs(b *testing.B) {
	b.Chdir(b.TempDir())
	const size = 16 << 20
	flow, id := bigLogRun(b, size, 4<<20)
	b.ReportAllocs()
	b.SetBytes(2 * size)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		if code := Run(context.Background(), flow, []string{"biglog", "logs", id}, io.Discard, io.Discard); code != 0 {
			b.Fatalf("logs: exit %d", code)
		}
	}
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/float64(2*size>>20), "alloc-B/log-MiB")
}
