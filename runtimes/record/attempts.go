package record

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// AttemptMarker is the line that starts, in a task's stdout.log and stderr.log,
// the output of attempt n that started at start. The local runtime writes it
// before what any attempt but the first writes (and before a first attempt's
// output when a resumed run's log already holds some), so that SplitAttempts
// can tell the attempts apart.
func AttemptMarker(n int, start time.Time) string {
	return fmt.Sprintf("--- attempt %d, %s ---\n", n, start.UTC().Format(time.RFC3339))
}

// AttemptLog is what one attempt wrote to a log.
type AttemptLog struct {
	// Attempt is the attempt's number, from 1.
	Attempt int
	// Start is when the attempt started, as its marker says; zero for output
	// before any marker.
	Start time.Time
	Data  []byte
}

// SplitAttempts splits a stdout.log or stderr.log into what each attempt of the
// task's last runner wrote, in order; an attempt that wrote nothing has no part.
// Output before any marker is the first attempt's. When a resumed run's log holds
// an earlier runner's attempts, only those from the last first attempt on are
// returned: Task.Attempts counts the last runner's.
func SplitAttempts(log []byte) []AttemptLog {
	var parts []AttemptLog
	cur := AttemptLog{Attempt: 1}
	for len(log) > 0 {
		line := log
		if i := bytes.IndexByte(log, '\n'); i >= 0 {
			line = log[:i+1]
		}
		log = log[len(line):]
		if n, start, ok := parseMarker(line); ok {
			if len(cur.Data) > 0 || !cur.Start.IsZero() {
				parts = append(parts, cur)
			}
			cur = AttemptLog{Attempt: n, Start: start}
			continue
		}
		cur.Data = append(cur.Data, line...)
	}
	if len(cur.Data) > 0 || !cur.Start.IsZero() {
		parts = append(parts, cur)
	}
	for i := len(parts) - 1; i > 0; i-- {
		if parts[i].Attempt == 1 {
			return parts[i:]
		}
	}
	return parts
}

// parseMarker reads an AttemptMarker line.
func parseMarker(line []byte) (int, time.Time, bool) {
	rest, ok := bytes.CutPrefix(line, []byte("--- attempt "))
	if !ok {
		return 0, time.Time{}, false
	}
	rest, ok = bytes.CutSuffix(rest, []byte(" ---\n"))
	if !ok {
		return 0, time.Time{}, false
	}
	num, stamp, ok := bytes.Cut(rest, []byte(", "))
	if !ok {
		return 0, time.Time{}, false
	}
	n, err := strconv.Atoi(string(num))
	if err != nil || n < 1 {
		return 0, time.Time{}, false
	}
	start, err := time.Parse(time.RFC3339, string(stamp))
	if err != nil {
		return 0, time.Time{}, false
	}
	return n, start, true
}
