package local

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// redrawEvery is how often the live view refreshes its durations.
const redrawEvery = 100 * time.Millisecond

// display writes what a run does. Plain, every event and every line of step output
// is a line of its own with a timestamp. Live, the bottom of the terminal holds one
// line per step, redrawn in place, and step output and failures scroll above it.
type display struct {
	r    *runner
	live bool

	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
	width  int
	height int
	// pad aligns the "|" of output lines.
	pad int
	// drawn is how many lines of the live view are on the screen.
	drawn   int
	ticker  *time.Ticker
	stopped chan struct{}
	done    chan struct{}
}

func newDisplay(r *runner) *display {
	d := &display{r: r, live: r.o.Live, out: r.o.Stdout, errOut: r.o.Stderr, width: r.o.Width, height: r.o.Height}
	if d.width <= 0 {
		d.width = 80
	}
	if d.height <= 0 {
		d.height = 24
	}
	for _, t := range r.tasks {
		d.pad = max(d.pad, utf8.RuneCountInString(t.label))
	}
	return d
}

// start begins redrawing the live view.
func (d *display) start() {
	if !d.live {
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

// stop draws the live view a last time and leaves it on the screen.
func (d *display) stop() {
	if !d.live {
		return
	}
	d.ticker.Stop()
	close(d.stopped)
	<-d.done
	d.mu.Lock()
	d.redraw()
	d.drawn = 0
	d.mu.Unlock()
}

// note writes a line about the whole run.
func (d *display) note(format string, args ...any) {
	d.line(d.out, fmt.Sprintf(format, args...))
}

// event writes what happened to a task. Live, only what matters later (failures,
// retries, steps not started) gets a line; the view shows the rest.
func (d *display) event(t *task, important bool, format string, args ...any) {
	if d.live && !important {
		d.mu.Lock()
		d.redraw()
		d.mu.Unlock()
		return
	}
	d.line(d.out, t.label+": "+fmt.Sprintf(format, args...))
}

// output writes a line a step printed, prefixed with its label.
func (d *display) output(t *task, stderr bool, text string) {
	w := d.out
	if stderr {
		w = d.errOut
	}
	d.line(w, t.label+strings.Repeat(" ", d.pad-utf8.RuneCountInString(t.label))+" | "+text)
}

func (d *display) line(w io.Writer, text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.live {
		d.clear()
		io.WriteString(w, text+"\n")
		return
	}
	io.WriteString(w, time.Now().Format("15:04:05.000")+" "+text+"\n")
}

// clear removes the live view from the screen; the next redraw puts it back.
func (d *display) clear() {
	if d.drawn > 0 {
		fmt.Fprintf(d.out, "\x1b[%dF\x1b[J", d.drawn)
		d.drawn = 0
	}
}

// redraw replaces the live view with the current state. Callers hold d.mu.
func (d *display) redraw() {
	if !d.live {
		return
	}
	lines := d.view(time.Now())
	var b strings.Builder
	if d.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dF\x1b[J", d.drawn)
	}
	for _, l := range lines {
		b.WriteString(fit(l, d.width-1))
		b.WriteByte('\n')
	}
	io.WriteString(d.out, b.String())
	d.drawn = len(lines)
}

// view renders one line for the run and one per step: state, attempt or items,
// duration.
func (d *display) view(now time.Time) []string {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	done := 0
	var rows [][]string
	for i := range r.flow.Steps {
		s := &r.flow.Steps[i]
		ts := r.steps[s.Name]
		state := summary(ts)
		if state.Final() {
			done++
		}
		var start, end time.Time
		finished, attempt := 0, 0
		for _, t := range ts {
			if !t.rec.Start.IsZero() && (start.IsZero() || t.rec.Start.Before(start)) {
				start = t.rec.Start
			}
			if t.rec.End.After(end) {
				end = t.rec.End
			}
			if t.rec.State.Final() {
				finished++
			}
			attempt = max(attempt, t.rec.Attempts)
		}
		var detail []string
		if s.Foreach != nil {
			detail = append(detail, fmt.Sprintf("%d/%d items", finished, len(ts)))
		}
		if attempt > 1 && state != Succeeded {
			detail = append(detail, fmt.Sprintf("attempt %d of %d", attempt, s.Retry+1))
		}
		dur := ""
		switch {
		case start.IsZero():
		case state.Final():
			dur = human(end.Sub(start))
		default:
			dur = human(now.Sub(start).Truncate(100 * time.Millisecond))
		}
		rows = append(rows, []string{s.Name, string(state), dur, strings.Join(detail, ", ")})
	}
	lines := []string{fmt.Sprintf("run %s: %d/%d steps done, %s", r.id, done, len(r.flow.Steps), human(now.Sub(r.rec.Start).Truncate(100*time.Millisecond)))}
	rows = d.fewer(rows)
	widths := make([]int, 3)
	for _, row := range rows {
		for c := range widths {
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

// fewer keeps the view within the terminal's height (the cursor cannot go back up
// to lines that scrolled away): when the steps do not fit, the running and failed
// ones come first, and one last row counts the rest by state.
func (d *display) fewer(rows [][]string) [][]string {
	room := max(d.height-2, 2) // the run's line, and a line for the cursor
	if len(rows) <= room {
		return rows
	}
	var kept, rest [][]string
	for _, row := range rows {
		switch State(row[1]) {
		case Running, Retrying, Failed:
			if len(kept) < room-1 {
				kept = append(kept, row)
				continue
			}
		}
		rest = append(rest, row)
	}
	count := map[string]int{}
	var order []string
	for _, row := range rest {
		if count[row[1]] == 0 {
			order = append(order, row[1])
		}
		count[row[1]]++
	}
	var parts []string
	for _, st := range order {
		parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
	}
	return append(kept, []string{fmt.Sprintf("%d more", len(rest)), strings.Join(parts, ", "), "", ""})
}

// fit cuts s to n runes, so that no line of the view wraps.
func fit(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}
