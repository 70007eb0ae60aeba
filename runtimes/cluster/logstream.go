package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
)

// The delays between the attempts to open a pod's log again: doubling from
// the first to the most, and back to the first when a stream delivered a line.
const (
	logRetryFirst = 200 * time.Millisecond
	logRetryMax   = 5 * time.Second
)

// PodLogs reads the logs and the state of the pods of a namespace, as
// Conn.Client.CoreV1().Pods(ns) and client-go's typed pod clients do.
type PodLogs interface {
	GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
}

// StreamLog follows the log of the step container of pod name, of the
// namespace of pods, calling line for each line (long lines in pieces: see
// display.MaxLine), until the container has ended and its log is read to its
// end, or ctx ends.
//
// A stream that is cut (its connection lost, as when the API server restarts),
// or that ends while the container still runs (as when its kubelet restarts:
// the pod's GET says so, and the stream opened again ends at once with nothing
// new when it did not), is opened again from where it stopped, backing off
// between attempts, and no line is lost or repeated. The lines come stamped
// with the container runtime's times (PodLogOptions.Timestamps), and the
// stream opened again starts at the time of the last line begun (SinceTime,
// which the API server takes to the second). Of that stream, the lines stamped
// before that time are dropped; of those stamped at that very time, to the
// nanosecond, as many as were delivered (the kubelet serves the log file in
// its order); and of a line cut in the middle, the bytes delivered.
//
// The error is the API server's answer when it refuses the log before any of
// it was read (a cluster that does not serve logs, a user who may not read
// them), or refuses it for good later; ctx's error when ctx ended first; else
// nil (and when the pod was deleted once its log was served).
func StreamLog(ctx context.Context, pods PodLogs, name string, line func(string)) error {
	return streamLog(ctx, pods, name, line, logHooks{})
}

// logHooks tell a LogFollower's streams about the cluster's logs.
type logHooks struct {
	// served, when not nil, is called when the API server first serves the
	// log; serves reports whether it served any pod's log, after which its
	// transient refusals (503, 500) of a log not yet served are taken as a
	// pod's, and asked again.
	served func()
	serves func() bool
	// ended, when not nil, reports whether the pod's step container has
	// ended, in place of a GET of the pod.
	ended func() (bool, error)
}

// streamLog is StreamLog, with hooks.
func streamLog(ctx context.Context, pods PodLogs, name string, line func(string), hooks logHooks) error {
	served := false
	c := &logCursor{line: line, partial: -1}
	delay := logRetryFirst
	wait := func() error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, logRetryMax)
		return nil
	}
	ended := hooks.ended
	if ended == nil {
		ended = func() (bool, error) { return containerEnded(ctx, pods, name) }
	}
	// cleanly is whether the last stream ended cleanly.
	cleanly := false
	for {
		opts := &corev1.PodLogOptions{Container: plan.ContainerName, Follow: true, Timestamps: true}
		if !c.last.IsZero() {
			opts.SinceTime = &metav1.Time{Time: c.last}
		}
		rc, err := pods.GetLogs(name, opts).Stream(ctx)
		delivered := false
		if err == nil {
			if !served && hooks.served != nil {
				hooks.served()
			}
			served = true
			delivered, err = c.read(rc)
			rc.Close()
			if delivered {
				delay = logRetryFirst
			}
		}
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && cleanly && !delivered:
			// A stream opened after one that ended cleanly ended too, with
			// nothing new: the kubelet follows a running container's log,
			// so the container has ended, whatever its pod's status says
			// yet.
			return nil
		case err == nil:
			// The stream ended: the container has, or the kubelet stopped
			// serving its log. When the pod's status does not say the
			// container ended (it may say so a moment after its log's end),
			// the log is opened again.
			cleanly = true
			switch done, err := ended(); {
			case err == nil && done, apierrors.IsNotFound(err):
				return nil
			case err != nil && !unanswered(err):
				return err
			}
			if err := wait(); err != nil {
				return err
			}
			continue
		case served && apierrors.IsNotFound(err):
			// The pod was deleted, and its log with it.
			return nil
		case !transient(err), !served && !unanswered(err) && (hooks.serves == nil || !hooks.serves()):
			// An answer that asking again does not change; or, before the
			// cluster served any log, the cluster's word on its logs.
			return err
		}
		cleanly = false
		if err := wait(); err != nil {
			return err
		}
	}
}

// containerEnded reports whether the step container of pod name has ended,
// as the API server says.
func containerEnded(ctx context.Context, pods PodLogs, name string) (bool, error) {
	p, err := pods.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	return podEnded(p), nil
}

// podEnded reports whether pod p's step container has ended, as p says.
func podEnded(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == plan.ContainerName {
			return cs.State.Terminated != nil
		}
	}
	return false
}

// logCursor is where the reading of a pod's log is: what was delivered of it,
// from the streams read so far.
type logCursor struct {
	line func(string)
	// begun is whether a line was begun; last is the time of the last line
	// begun, atLast how many lines stamped at last ended, and partial how many
	// bytes of the last line begun were delivered (-1 once it ended).
	begun   bool
	last    time.Time
	atLast  int
	partial int
	// scratch joins a rune cut at the end of a piece to the rest of it.
	scratch []byte
}

// What read does with the line it reads.
const (
	deliverLine = iota // deliver it
	dropLine           // it was delivered: drop it
	skipBytes          // its first bytes were delivered: skip them, deliver the rest
)

// read delivers the lines of stream r past those delivered, and returns
// whether it delivered any, and how r ended: nil when it ended cleanly.
func (c *logCursor) read(r io.Reader) (delivered bool, err error) {
	// A piece is what the buffer holds, and the end of a rune the piece
	// before it cut: at most display.MaxLine.
	rd := &logRead{c: c, br: bufio.NewReaderSize(r, display.MaxLine-utf8.UTFMax+1),
		replay: c.begun, cut: c.last, atCut: c.atLast, partial: c.partial, start: true, mode: deliverLine}
	for {
		b, err := rd.piece()
		ends, full := err == nil, errors.Is(err, bufio.ErrBufferFull)
		if rd.start && (len(b) > 0 || ends) {
			at, text, ok := stamp(b)
			if !ok && !ends && !full {
				// Cut before its time was read: the stream opened again
				// sends the line again. A stream that ends cleanly there
				// was cut too (an API server shutting down ends its
				// streams cleanly), for the kubelet stamps every line.
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return rd.delivered, err
			}
			if ok {
				b = text
			} else {
				at = c.last
			}
			rd.begin(at)
		}
		rd.deliver(rd.skipDelivered(b), ends)
		if ends {
			rd.start = true
		}
		if err != nil && !full {
			if err == io.EOF {
				err = nil
			}
			return rd.delivered, err
		}
	}
}

// logRead is the reading of one stream of a pod's log (logCursor.read).
type logRead struct {
	c  *logCursor
	br *bufio.Reader
	// The stream begins again at the cursor's last line: until its lines pass
	// the cut, it replays what was delivered (replay): atCut more lines stamped
	// at cut, and partial bytes of the line begun there (-1 for none).
	replay         bool
	cut            time.Time
	atCut, partial int
	// start is whether the next piece starts a line; mode is what is done with
	// the line being read, skip how many of its bytes are still to be skipped,
	// and lineAt its time.
	start      bool
	mode, skip int
	lineAt     time.Time
	// carry is the rest of a rune that the last piece cut.
	carry     []byte
	delivered bool
}

// piece reads the next piece of the stream: to the end of a line, or what the
// buffer holds, in whole runes, with the error of bufio.Reader.ReadSlice.
func (rd *logRead) piece() ([]byte, error) {
	b, err := rd.br.ReadSlice('\n')
	ends, full := err == nil, errors.Is(err, bufio.ErrBufferFull)
	if len(rd.carry) > 0 {
		rd.c.scratch = append(append(rd.c.scratch[:0], rd.carry...), b...)
		b, rd.carry = rd.c.scratch, nil
	}
	if !ends && err != io.EOF {
		// Whole runes only: the rest of a rune that the buffer cuts comes
		// with the next piece; a stream cut sends it again.
		k := display.RuneCut(b)
		if full {
			rd.carry = append([]byte(nil), b[k:]...)
		}
		b = b[:k]
	}
	return b, err
}

// begin starts reading the line stamped at: it is delivered, unless the
// stream replays what was delivered (dropLine, skipBytes).
func (rd *logRead) begin(at time.Time) {
	c := rd.c
	rd.start, rd.mode = false, deliverLine
	switch {
	case !rd.replay:
	case at.Before(rd.cut):
		rd.mode = dropLine
	case at.Equal(rd.cut) && rd.atCut > 0:
		rd.mode, rd.atCut = dropLine, rd.atCut-1
	case at.Equal(rd.cut) && rd.partial >= 0:
		rd.mode, rd.skip, rd.replay, rd.lineAt = skipBytes, rd.partial, false, at
	default:
		rd.replay = false
	}
	if rd.mode == deliverLine {
		if !c.begun || at.After(c.last) {
			c.last, c.atLast = at, 0
		}
		c.begun, c.partial, rd.lineAt = true, 0, at
	}
}

// skipDelivered returns piece b without the bytes of its line that were
// delivered already (skipBytes); the rest of the line is delivered.
func (rd *logRead) skipDelivered(b []byte) []byte {
	if rd.mode == skipBytes {
		k := min(rd.skip, len(b))
		b, rd.skip = b[k:], rd.skip-k
		if rd.skip == 0 {
			rd.mode = deliverLine
		}
	}
	return b
}

// deliver delivers piece b of the line being read, when the line is
// delivered (deliverLine): whole, or after display.Continues when it
// continues a piece delivered; ends is whether b ends the line.
func (rd *logRead) deliver(b []byte, ends bool) {
	if rd.mode != deliverLine {
		return
	}
	c := rd.c
	text := b
	if ends {
		text = bytes.TrimSuffix(bytes.TrimSuffix(text, []byte("\n")), []byte("\r"))
	}
	switch {
	case c.partial > 0 && len(text) > 0:
		c.line(display.Continues + string(text))
		rd.delivered = true
	case c.partial == 0 && (len(text) > 0 || ends):
		c.line(string(text))
		rd.delivered = true
	}
	c.partial += len(b)
	if ends {
		if rd.lineAt.Equal(c.last) {
			c.atLast++
		}
		c.partial = -1
	}
}

// stamp splits a log line served with timestamps into its time and its text.
func stamp(b []byte) (time.Time, []byte, bool) {
	i := bytes.IndexByte(b[:min(len(b), len(time.RFC3339Nano)+8)], ' ')
	if i < 0 {
		return time.Time{}, b, false
	}
	at, err := time.Parse(time.RFC3339Nano, string(b[:i]))
	if err != nil {
		return time.Time{}, b, false
	}
	return at, b[i+1:], true
}
