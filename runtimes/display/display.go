// Package display writes what a run does, for any runtime. Plain, every event and
// every line of step output is a line of its own with a timestamp. Live, the
// bottom of the terminal holds a view of the run, one row per step redrawn in
// place, and step output and failures scroll above it.
//
// The runtime supplies the view (Options.View): a title, an optional header and
// one row of cells per step; the display aligns the columns, keeps the view within
// the terminal and redraws it as the run goes on.
package display

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/manifoldflow/manifold/runtimes/record"
)

// redrawEvery is how often the live view refreshes its durations.
const redrawEvery = 100 * time.Millisecond

// Options say where a Display writes and what its live view shows.
type Options struct {
	// Stdout receives events, notes, the steps' standard output and the live
	// view; Stderr the steps' standard error. io.Discard when nil.
	Stdout, Stderr io.Writer
	// Live redraws the view in place on Stdout, a terminal Width columns wide
	// (80 when 0) and Height lines high (24 when 0); otherwise every event is a
	// timestamped line and the view is never drawn.
	Live          bool
	Width, Height int
	// Labels are every label Output may be called with, to align the "|" of
	// output lines.
	Labels []string
	// View returns the live view at now: the run's line, a header row (nil for
	// none) and one row of cells per step. Live, it is called (from the
	// redrawing goroutine, Event and Stop) while the Display holds its lock, so it
	// must not call the Display.
	View func(now time.Time) (title string, header []string, rows [][]string)
	// StateColumn is the column of each row that holds its record.State. When the
	// terminal is too short for every row, rows queued, running, retrying or
	// failed are kept and one last row counts the others by state, in that
	// column.
	StateColumn int
	// Now is the clock of the lines' timestamps and the live view; time.Now
	// when nil.
	Now func() time.Time
}

// Display writes what a run does: see the package comment. Its methods may be
// called from any goroutine.
type Display struct {
	o Options

	mu sync.Mutex
	// pad aligns the "|" of output lines.
	pad int
	// drawn is how many lines of the live view are on the screen.
	drawn   int
	ticker  *time.Ticker
	stopped chan struct{}
	done    chan struct{}
}

// New returns a Display; Start begins redrawing its live view.
func New(o Options) *Display {
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Width <= 0 {
		o.Width = 80
	}
	if o.Height <= 0 {
		o.Height = 24
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	d := &Display{o: o}
	for _, l := range o.Labels {
		d.pad = max(d.pad, utf8.RuneCountInString(l))
	}
	return d
}

// Start begins redrawing the live view; it does nothing when the display is not
// live.
func (d *Display) Start() {
	if !d.o.Live || d.ticker != nil {
		return
	}
	d.ticker = time.NewTicker(redrawEvery)
	d.stopped, d.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(d.done)
		for {
			select {
			case <-d.ticker.C:
				d.mu.Lock()
				d.redraw()
				d.mu.Unlock()
			case <-d.stopped:
				return
			}
		}
	}()
}

// Stop draws the live view a last time and leaves it on the screen: what is
// written next goes below it.
func (d *Display) Stop() {
	if !d.o.Live {
		return
	}
	if d.ticker != nil {
		d.ticker.Stop()
		close(d.stopped)
		<-d.done
		d.ticker = nil
	}
	d.mu.Lock()
	d.redraw()
	d.drawn = 0
	d.mu.Unlock()
}

// Note writes a line about the whole run.
func (d *Display) Note(format string, args ...any) {
	d.line(d.o.Stdout, fmt.Sprintf(format, args...))
}

// Event writes what happened to the step or item label: "label: what". Live, only
// what matters later (failures, retries, steps not started) is important enough
// for a line; the view shows the rest, and is redrawn instead.
func (d *Display) Event(label string, important bool, format string, args ...any) {
	if d.o.Live && !important {
		d.mu.Lock()
		d.redraw()
		d.mu.Unlock()
		return
	}
	d.line(d.o.Stdout, label+": "+fmt.Sprintf(format, args...))
}

// Output writes a line that the step or item label printed, to Stderr when it
// printed it there, prefixed with the label and aligned with the other labels'.
func (d *Display) Output(label string, stderr bool, text string) {
	w := d.o.Stdout
	if stderr {
		w = d.o.Stderr
	}
	d.line(w, Prefixed(label, d.pad, text))
}

// Prefixed is a line of output as the display shows it: label, padded to width
// runes, then " | " and text.
func Prefixed(label string, width int, text string) string {
	return label + strings.Repeat(" ", max(width-utf8.RuneCountInString(label), 0)) + " | " + text
}

// CopyPrefixed copies r to w, each line prefixed as Prefixed prefixes it
// (label padded to width runes, then " | "), and a last line that r does not
// end ended, in bounded memory: a line, however long, is copied as it is read,
// not held whole. It returns the bytes of r copied.
func CopyPrefixed(w io.Writer, r io.Reader, label string, width int) (int64, error) {
	prefix := Prefixed(label, width, "")
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	var n int64
	start := true
	for {
		b, err := br.ReadSlice('\n')
		if len(b) > 0 {
			if start {
				bw.WriteString(prefix)
			}
			bw.Write(b)
			n += int64(len(b))
			start = b[len(b)-1] == '\n'
		}
		switch {
		case err == io.EOF:
			if !start {
				bw.WriteByte('\n')
			}
			return n, bw.Flush()
		case err != nil && err != bufio.ErrBufferFull:
			bw.Flush()
			return n, err
		}
	}
}

func (d *Display) line(w io.Writer, text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.o.Live {
		d.clear()
		io.WriteString(w, text+"\n")
		return
	}
	io.WriteString(w, d.o.Now().Format("15:04:05.000")+" "+text+"\n")
}

// clear removes the live view from the screen; the next redraw puts it back.
func (d *Display) clear() {
	if d.drawn > 0 {
		fmt.Fprintf(d.o.Stdout, "\x1b[%dF\x1b[J", d.drawn)
		d.drawn = 0
	}
}

// redraw replaces the live view with the current state. Callers hold d.mu.
func (d *Display) redraw() {
	if !d.o.Live || d.o.View == nil {
		return
	}
	lines := d.view(d.o.Now())
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dF\x1b[J", d.drawn)
	}
	for _, l := range lines {
		b.WriteString(fit(l, d.o.Width-1))
		b.WriteByte('\n')
	}
	io.WriteString(d.o.Stdout, b.String())
	d.drawn = len(lines)
}

// view renders the run's line, then the header and the rows in columns two spaces
// apart; the last column is not padded.
func (d *Display) view(now time.Time) []string {
	title, header, rows := d.o.View(now)
	lines := []string{title}
	room := max(d.o.Height-2, 2) // the run's line, and a line for the cursor
	if header != nil {
		room = max(room-1, 2)
		rows = append([][]string{header}, d.fewer(rows, room)...)
	} else {
		rows = d.fewer(rows, room)
	}
	cols := 0
	for _, row := range rows {
		cols = max(cols, len(row))
	}
	widths := make([]int, max(cols-1, 0))
	for _, row := range rows {
		for c := range min(len(widths), len(row)) {
			widths[c] = max(widths[c], utf8.RuneCountInString(row[c]))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for c, cell := range row {
			b.WriteString(cell)
			if c < len(widths) {
				b.WriteString(strings.Repeat(" ", widths[c]-utf8.RuneCountInString(cell)+2))
			}
		}
		lines = append(lines, strings.TrimRight(b.String(), " "))
	}
	return lines
}

// fewer keeps the rows within room lines (the cursor cannot go back up to lines
// that scrolled away): when they do not fit, the queued, running, retrying and
// failed ones come first, and one last row counts the rest by state.
func (d *Display) fewer(rows [][]string, room int) [][]string {
	if len(rows) <= room {
		return rows
	}
	var kept, rest [][]string
	for _, row := range rows {
		switch record.State(d.state(row)) {
		case record.Queued, record.Running, record.Retrying, record.Failed:
			if len(kept) < room-1 {
				kept = append(kept, row)
				continue
			}
		}
		rest = append(rest, row)
	}
	count := map[string]int{}
	var order []string
	cols := 0
	for _, row := range rest {
		st := d.state(row)
		if count[st] == 0 {
			order = append(order, st)
		}
		count[st]++
		cols = max(cols, len(row))
	}
	var parts []string
	for _, st := range order {
		parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
	}
	more := fmt.Sprintf("%d more", len(rest))
	c := d.o.StateColumn
	if c <= 0 || c >= cols {
		return append(kept, []string{more + ": " + strings.Join(parts, ", ")})
	}
	last := make([]string, cols)
	last[0], last[c] = more, strings.Join(parts, ", ")
	return append(kept, last)
}

// state is the state cell of row, or "".
func (d *Display) state(row []string) string {
	if c := d.o.StateColumn; c >= 0 && c < len(row) {
		return row[c]
	}
	return ""
}

// fit cuts s to n runes, so that no line of the view wraps.
func fit(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// Human prints a duration for people: 350ms, 1.2s, 3m4s.
func Human(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Count prints n of a noun for people: 1 step, 3 steps, 2 processes.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "s") {
		return strconv.Itoa(n) + " " + noun + "es"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// Rel returns path relative to the working directory when it is below it, for
// shorter messages; otherwise path.
func Rel(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	if r, err := filepath.Rel(wd, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// MaxLine is the most bytes of a line of step output shown (and, from a
// cluster, recorded) at once: a longer line (a progress bar redrawn with
// carriage returns and never a newline) comes in pieces of at most this many
// bytes, cut between runes (RuneCut), each but the first beginning with
// Continues. Whoever reads output in pieces holds no more of a line.
const MaxLine = 64 << 10

// Continues begins each piece of a long line of output but its first: the
// piece goes on with the line of the piece before it.
const Continues = "… "

// RuneCut returns the length of b without the rune that the end of b cuts,
// if it cuts one.
func RuneCut(b []byte) int {
	for k := 1; k <= utf8.UTFMax && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return len(b) - k
			}
			break
		}
	}
	return len(b)
}
