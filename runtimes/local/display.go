package local

import (
	"fmt"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/runtimes/display"
)

// newDisplay returns the display of r's run: a line for the run, then one row per
// step.
func newDisplay(r *runner) *display.Display {
	labels := make([]string, len(r.tasks))
	for i, t := range r.tasks {
		labels[i] = t.label
	}
	return display.New(display.Options{
		Stdout: r.o.Stdout, Stderr: r.o.Stderr,
		Live: r.o.Live, Width: r.o.Width, Height: r.o.Height,
		Labels: labels, View: r.view, StateColumn: 1,
	})
}

// view is the live view: a line for the run, and a row per step with its state,
// duration, and items done or attempt.
func (r *runner) view(now time.Time) (string, []string, [][]string) {
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
			dur = display.Human(end.Sub(start))
		default:
			dur = display.Human(now.Sub(start).Truncate(100 * time.Millisecond))
		}
		rows = append(rows, []string{s.Name, string(state), dur, strings.Join(detail, ", ")})
	}
	title := fmt.Sprintf("run %s: %d/%d steps done, %s", r.id, done, len(r.flow.Steps), display.Human(now.Sub(r.rec.Start).Truncate(100*time.Millisecond)))
	return title, nil, rows
}
