package cluster_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/harness/loglines"
	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// logEntry is a line of a fake container's log, as the container runtime
// stamps it: text, or text repeated times over.
type logEntry struct {
	at     time.Time
	text   string
	repeat int
}

// fakeLogs is an API server that serves one pod's log and status as the
// kubelet and the API server do: GET .../pods/NAME/log with follow,
// timestamps (each line prefixed with its RFC 3339 time and a space) and
// sinceTime (the lines stamped at or after it, which comes to the second), and
// GET .../pods/NAME. It answers through an http.RoundTripper, without a
// network.
type fakeLogs struct {
	entries []logEntry
	// cuts are where the log streams it serves are cut (the connection lost,
	// as when the API server restarts): the first stream after cuts[0] bytes
	// of its body, the second after cuts[1], and so on; a stream past the
	// last ends when the log does.
	cuts []int
	// running is how many of the pod's GETs answer that its container still
	// runs, before they answer that it ended (as when the kubelet's status
	// lags behind the end of its log).
	running int
	// clean is whether the cuts end the streams cleanly, as the API server
	// ends one that the kubelet stopped serving.
	clean bool
	// refuse are the codes of the API server's answers to the first log
	// requests, before it serves the log.
	refuse []int

	mu       sync.Mutex
	requests []string // the log requests' queries
	gets     int
}

func (f *fakeLogs) RoundTrip(req *http.Request) (*http.Response, error) {
	_, path, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/api/v1/namespaces/ns/pods/"), "/")
	path = "p" + strings.TrimSuffix("/"+path, "/")
	f.mu.Lock()
	defer f.mu.Unlock()
	switch path {
	case "p":
		f.gets++
		state := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
		if f.gets <= f.running {
			state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
		}
		pod := corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
			Status:     corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: plan.ContainerName, State: state}}},
		}
		data, _ := json.Marshal(pod)
		return respond(req, http.StatusOK, io.NopCloser(bytes.NewReader(data))), nil
	case "p/log":
	default:
		return respond(req, http.StatusNotFound, io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))), nil
	}
	q := req.URL.Query()
	f.requests = append(f.requests, q.Encode())
	if n := len(f.requests) - 1; n < len(f.refuse) {
		code := f.refuse[n]
		status := fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"refused with %d","code":%d}`, code, code)
		return respond(req, code, io.NopCloser(strings.NewReader(status))), nil
	}
	if q.Get("container") != plan.ContainerName || q.Get("follow") != "true" {
		return nil, fmt.Errorf("fake: unexpected log request %s", req.URL)
	}
	var since time.Time
	if s := q.Get("sinceTime"); s != "" {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, fmt.Errorf("fake: sinceTime %q: %v", s, err)
		}
		since = t
	}
	from := 0
	for from < len(f.entries) && f.entries[from].at.Before(since) {
		from++
	}
	var body io.Reader = &logBody{entries: f.entries[from:], stamps: q.Get("timestamps") == "true"}
	if n := len(f.requests) - 1 - len(f.refuse); n < len(f.cuts) {
		body = io.LimitReader(body, int64(f.cuts[n]))
		if !f.clean {
			body = &cutReader{r: body}
		}
	}
	return respond(req, http.StatusOK, io.NopCloser(body)), nil
}

func respond(req *http.Request, code int, body io.ReadCloser) *http.Response {
	return &http.Response{StatusCode: code, Header: http.Header{"Content-Type": {"application/json"}}, Body: body, Request: req}
}

// logBody is the body of a log request: entries, each stamped when stamps
// is set, made as it is read.
type logBody struct {
	entries []logEntry
	stamps  bool
	// The entry being read, its part (0 the stamp, 1 the text, 2 the
	// newline), and the offset in that part.
	i, part, off int
	stamp        string
}

func (b *logBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && b.i < len(b.entries) {
		e := b.entries[b.i]
		var s string
		size := 0
		switch b.part {
		case 0:
			if b.stamps && b.off == 0 {
				b.stamp = e.at.UTC().Format(time.RFC3339Nano) + " "
			}
			if b.stamps {
				s, size = b.stamp, len(b.stamp)
			}
		case 1:
			s, size = e.text, len(e.text)*max(e.repeat, 1)
		case 2:
			s, size = "\n", 1
		default:
			b.i, b.part, b.off = b.i+1, 0, 0
			continue
		}
		if b.off >= size {
			b.part, b.off = b.part+1, 0
			continue
		}
		k := copy(p[n:min(len(p), n+size-b.off)], s[b.off%len(s):])
		n, b.off = n+k, b.off+k
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// cutReader reads r, then fails as a lost connection does.
type cutReader struct{ r io.Reader }

func (c *cutReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// fakePods serves the pods named by its keys, each as its fakeLogs does.
type fakePods map[string]*fakeLogs

func (f fakePods) RoundTrip(req *http.Request) (*http.Response, error) {
	name, _, _ := strings.Cut(strings.TrimPrefix(req.URL.Path, "/api/v1/namespaces/ns/pods/"), "/")
	if p, ok := f[name]; ok {
		return p.RoundTrip(req)
	}
	return nil, fmt.Errorf("fake: no pod %s", name)
}

// pods returns a client of f's pods, as a run makes its client.
func (f *fakeLogs) pods(t testing.TB) cluster.PodLogs {
	t.Helper()
	cs, err := kubeclient.NewForConfig(&rest.Config{Host: "http://api.invalid", Transport: f})
	if err != nil {
		t.Fatal(err)
	}
	return cs.CoreV1().Pods("ns")
}

func streamAll(t *testing.T, f *fakeLogs) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var pieces []string
	err := cluster.StreamLog(ctx, f.pods(t), "p", func(s string) {
		if len(s) > display.MaxLine+len(display.Continues) {
			t.Errorf("a piece of %d bytes, more than %d and the mark", len(s), display.MaxLine)
		}
		pieces = append(pieces, s)
	})
	if err != nil {
		t.Errorf("StreamLog: %v", err)
	}
	return pieces
}

func checkLines(t *testing.T, got []string, entries []logEntry) {
	t.Helper()
	want := make([]string, len(entries))
	for i, e := range entries {
		want[i] = e.text
	}
	if len(got) != len(want) {
		t.Errorf("got %d lines, want %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, loglines.Short(got[i]), loglines.Short(want[i]))
		}
	}
}

// progressLog is a log with a line of n bytes (a progress bar redrawn with
// carriage returns, and a multi-byte rune that pieces must not split) between
// short lines, stamped 10 ms apart.
func progressLog(n int) []logEntry {
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var bar strings.Builder
	for i := 0; bar.Len() < n; i++ {
		fmt.Fprintf(&bar, "\r%3d%% ▕%s▏", i%100, strings.Repeat("█", i%40))
	}
	return []logEntry{
		{at: base, text: "epoch 1"},
		{at: base.Add(10 * time.Millisecond), text: bar.String()},
		{at: base.Add(20 * time.Millisecond), text: "epoch 1 done"},
		{at: base.Add(30 * time.Millisecond), text: "epoch 2"},
	}
}

// TestStreamLogLongLine: a line of 5 MiB (past the 4 MiB a line could be)
// reaches the consumer in pieces, whole runes each, that join into it, and the
// lines after it follow.
func TestStreamLogLongLine(t *testing.T) {
	f := &fakeLogs{entries: progressLog(5 << 20)}
	checkLines(t, loglines.Joined(streamAll(t, f)), f.entries)
}

// TestStreamLogReopened: a stream cut mid-line (its connection lost, as when
// the API server restarts) is opened again from where it stopped, four times
// over, with no line lost or repeated: lines stamped within the same second,
// and pairs with the very same time, on either side of the cuts, and a cut in
// the middle of a long line.
func TestStreamLogReopened(t *testing.T) {
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var entries []logEntry
	for i := range 40 {
		at := base.Add(time.Duration(i) * 100 * time.Millisecond)
		if i == 13 || i == 26 || i == 31 {
			at = entries[i-1].at // the same time, to the nanosecond
		}
		text := "line " + strconv.Itoa(i)
		if i == 30 {
			text = strings.Repeat("long ", 100_000)
		}
		entries = append(entries, logEntry{at: at, text: text})
	}
	size := func(n int) int { // bytes of the first n lines, stamped
		b := 0
		for _, e := range entries[:n] {
			b += len(e.at.Format(time.RFC3339Nano)) + 1 + len(e.text) + 1
		}
		return b
	}
	stamp := func(n int) int { return len(entries[n].at.Format(time.RFC3339Nano)) + 1 }
	// The first stream is cut 3 bytes into the text of line 13, which has
	// line 12's time; the second (from 12:00:01, line 10) in the time of line
	// 27; the third (from 12:00:02, line 20) 150,000 bytes into the long line
	// 30; the fourth (from 12:00:03, line 30, whose time line 31 has too) in
	// the time of line 32; the fifth (from 12:00:03 again) reads to the end.
	f := &fakeLogs{entries: entries, cuts: []int{
		size(13) + stamp(13) + 3,
		size(27) - size(10) + 3,
		size(30) - size(20) + stamp(30) + 150_000,
		size(32) - size(30) + 3,
	}}
	checkLines(t, loglines.Joined(streamAll(t, f)), entries)
	if len(f.requests) != 5 {
		t.Errorf("%d log requests (%q), want 5: one, and one after each of 4 cuts", len(f.requests), f.requests)
	}
}

// TestStreamLogEndsWhenContainerEnded: a stream that ends cleanly while the
// pod's container still runs (its kubelet restarted) is opened again, and the
// log is read until the container has ended; a stream that ends cleanly after
// one that did, with nothing new, ends the log even while the pod's status
// lags behind.
func TestStreamLogEndsWhenContainerEnded(t *testing.T) {
	entries := numbered("line", 4)
	first := 0
	for _, e := range entries[:2] {
		first += len(e.at.Format(time.RFC3339Nano)) + 1 + len(e.text) + 1
	}
	f := &fakeLogs{entries: entries, cuts: []int{first}, clean: true, running: 1}
	checkLines(t, loglines.Joined(streamAll(t, f)), f.entries)
	if f.gets != 2 || len(f.requests) != 2 {
		t.Errorf("%d pod reads and %d log requests, want 2 of each: the log read again while the container ran", f.gets, len(f.requests))
	}
	lagging := &fakeLogs{entries: entries, running: 100}
	checkLines(t, loglines.Joined(streamAll(t, lagging)), entries)
	if lagging.gets != 1 || len(lagging.requests) != 2 {
		t.Errorf("status lagging: %d pod reads and %d log requests, want 1 and 2", lagging.gets, len(lagging.requests))
	}
}

// TestStreamLogCleanCutAnywhere: a stream that ends cleanly at any byte (as
// an API server shutting down ends the streams it proxies) while the
// container runs is opened again, and every line arrives once and whole; a
// stream that ended in a line's time stamp delivers nothing of that line.
func TestStreamLogCleanCutAnywhere(t *testing.T) {
	entries := numbered("line", 3)
	total := 0
	for _, e := range entries {
		total += len(e.at.Format(time.RFC3339Nano)) + 1 + len(e.text) + 1
	}
	for cut := 1; cut < total; cut++ {
		t.Run(strconv.Itoa(cut), func(t *testing.T) {
			t.Parallel()
			f := &fakeLogs{entries: entries, cuts: []int{cut}, clean: true, running: 1}
			got := loglines.Joined(streamAll(t, f))
			if !slices.Equal(got, []string{"line 0", "line 1", "line 2"}) {
				t.Errorf("a stream ended cleanly after %d bytes: got %q", cut, got)
			}
		})
	}
}

// bigLog is a fake log of about total bytes: 100-byte lines, and every 64th
// a line of long bytes.
func bigLog(total, long int) (*fakeLogs, int) {
	f := &fakeLogs{}
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	n := 0
	for i := 0; n < total; i++ {
		size := 100
		if i%64 == 0 {
			size = long
		}
		f.entries = append(f.entries, logEntry{at: base.Add(time.Duration(i) * time.Millisecond), text: "x", repeat: size})
		n += size
	}
	return f, n
}

// heapPeak samples the bytes of the heap's objects (runtime.MemStats
// HeapAlloc, which counts what is not collected yet too) every 64th call of
// sample, and keeps the most seen.
type heapPeak struct {
	calls int
	peak  uint64
}

func (h *heapPeak) sample() {
	h.calls++
	if h.calls%64 != 1 {
		return
	}
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h.peak = max(h.peak, m.HeapAlloc)
}

// TestStreamLogBoundedMemory streams a 128 MiB log with lines of 32 MiB, and
// holds the heap under 16 MiB all along: no line is held whole.
func TestStreamLogBoundedMemory(t *testing.T) {
	f, total := bigLog(128<<20, 32<<20)
	pods := f.pods(t)
	delivered := 0
	var h heapPeak
	runtime.GC()
	err := cluster.StreamLog(context.Background(), pods, "p", func(s string) {
		delivered += len(strings.TrimPrefix(s, display.Continues))
		h.sample()
	})
	if err != nil {
		t.Fatal(err)
	}
	if delivered != total {
		t.Fatalf("%d bytes delivered of %d", delivered, total)
	}
	if h.peak > 16<<20 {
		t.Errorf("streaming %d MiB in lines of up to 32 MiB, the heap reached %.1f MiB, want at most 16", total>>20, float64(h.peak)/(1<<20))
	}
}

// BenchmarkStreamLog streams a 32 MiB log with lines of 8 MiB, and reports the
// heap's peak (peak-heap-B) besides the allocations.
func BenchmarkStreamLog(b *testing.B) {
	f, total := bigLog(32<<20, 8<<20)
	pods := f.pods(b)
	b.ReportAllocs()
	b.SetBytes(int64(total))
	var h heapPeak
	for b.Loop() {
		if err := cluster.StreamLog(context.Background(), pods, "p", func(string) { h.sample() }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(h.peak), "peak-heap-B")
}

// startedPod is pod name of namespace ns, its step container running.
func startedPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: plan.ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
}

// endedPod is startedPod once its step container has ended.
func endedPod(name string) *corev1.Pod {
	p := startedPod(name)
	p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}
	return p
}

// numbered is a log of n lines "name i", 100 ms apart.
func numbered(name string, n int) []logEntry {
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var es []logEntry
	for i := range n {
		es = append(es, logEntry{at: base.Add(time.Duration(i) * 100 * time.Millisecond), text: name + " " + strconv.Itoa(i)})
	}
	return es
}

// follower returns a LogFollower of the pods of f, recording into a run
// directory of its own, and what its display shows (to be read once the
// follower stopped).
func follower(t *testing.T, f fakePods) (*cluster.LogFollower, string, *bytes.Buffer) {
	t.Helper()
	cs, err := kubeclient.NewForConfig(&rest.Config{Host: "http://api.invalid", Transport: f})
	if err != nil {
		t.Fatal(err)
	}
	out := &bytes.Buffer{}
	dir := t.TempDir()
	disp := display.New(display.Options{Stdout: out})
	return cluster.NewLogFollower(disp, dir, func(ns string) cluster.PodLogs { return cs.CoreV1().Pods(ns) }), dir, out
}

// recorded returns the lines of step's stdout.log in run directory dir.
func recorded(t *testing.T, dir, step string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(record.StateDir(dir, step, -1), record.StdoutLog))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// wantRecorded checks that step's stdout.log holds entries, each labelled.
func wantRecorded(t *testing.T, dir, step string, entries []logEntry) {
	t.Helper()
	got := recorded(t, dir, step)
	var want []string
	for _, e := range entries {
		want = append(want, display.Prefixed(step, 0, e.text))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s's stdout.log holds\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLogFollowerPodAlone: once the cluster has served a log, what befalls a
// pod's stream befalls that pod's alone. Pod a's stream is cut and opened
// again; pod b's first request is answered 503 and made again; pod c's is
// answered 403 (as if its namespace's logs were not the user's), which is
// noted naming it; and every line of
// a and b is recorded once. The streams end when the pods do, as told by the
// caller (no GET of a pod).
func TestLogFollowerPodAlone(t *testing.T) {
	f := fakePods{
		"a": {entries: numbered("a", 20), cuts: []int{200}},
		"b": {entries: numbered("b", 20), refuse: []int{http.StatusServiceUnavailable}},
		"c": {entries: numbered("c", 3), refuse: []int{http.StatusForbidden}},
	}
	l, dir, out := follower(t, f)
	l.Follow(startedPod("a"), "a", "a", -1)
	for deadline := time.Now().Add(time.Minute); len(recorded(t, dir, "a")) < 2; {
		if time.Now().After(deadline) {
			t.Fatal("pod a's log was not served")
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.Follow(startedPod("b"), "b", "b", -1)
	l.Follow(startedPod("c"), "c", "c", -1)
	// The pods end, as the caller sees them.
	for _, name := range []string{"a", "b", "c"} {
		l.Follow(endedPod(name), name, name, -1)
	}
	l.Stop()
	wantRecorded(t, dir, "a", f["a"].entries)
	wantRecorded(t, dir, "b", f["b"].entries)
	if n := len(f["a"].requests); n != 2 {
		t.Errorf("pod a: %d log requests, want 2 (one, and one after the cut)", n)
	}
	for name, p := range f {
		if p.gets > 0 {
			t.Errorf("pod %s: %d GETs of the pod, want none: the caller tells whether it ended", name, p.gets)
		}
	}
	shown := out.String()
	if strings.Contains(shown, "does not serve") {
		t.Errorf("one pod's refusal was taken for the cluster's:\n%s", shown)
	}
	if !strings.Contains(shown, "the log of pod c (c) cannot be read further") {
		t.Errorf("the display does not say that pod c's log cannot be read:\n%s", shown)
	}
}

// TestLogFollowerUnserved: a cluster whose first answer to a log request
// refuses it (a kubelet-less simulation) is said once not to serve logs, and
// no more logs are asked of it.
func TestLogFollowerUnserved(t *testing.T) {
	f := fakePods{
		"a": {entries: numbered("a", 3), refuse: []int{http.StatusInternalServerError}},
		"b": {entries: numbered("b", 3)},
	}
	l, _, out := follower(t, f)
	l.Follow(startedPod("a"), "a", "a", -1)
	l.Stop()
	l.Follow(startedPod("b"), "b", "b", -1)
	if n := len(f["b"].requests); n != 0 {
		t.Errorf("pod b's log was asked for %d times after the cluster refused logs", n)
	}
	if n := strings.Count(out.String(), "the cluster does not serve pod logs"); n != 1 {
		t.Errorf("said %d times that the cluster does not serve logs, want once:\n%s", n, out.String())
	}
}
