package dag

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// StepView is a live view (display.Options.View) with a row per step: its
// name, state, time, and items done or attempt when they say more.
func (r *Run) StepView(now time.Time) (string, []string, [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := 0
	rows := make([][]string, 0, len(r.Flow.Steps))
	for i := range r.Flow.Steps {
		s := &r.Flow.Steps[i]
		us := r.steps[s.Name]
		state := r.stepState(s.Name)
		if state.Final() {
			done++
		}
		var start, end time.Time
		finished, attempt := 0, 0
		for _, u := range us {
			t := &u.rec
			if !t.Start.IsZero() && (start.IsZero() || t.Start.Before(start)) {
				start = t.Start
			}
			if t.End.After(end) {
				end = t.End
			}
			if t.State.Final() {
				finished++
			}
			attempt = max(attempt, t.Attempts)
		}
		var detail []string
		switch {
		case s.Foreach != nil, s.ForeachOf != nil && r.expanded[s.Name] && !(len(us) == 1 && us[0].Index < 0):
			detail = append(detail, fmt.Sprintf("%d/%d items", finished, len(us)))
		case s.ForeachOf != nil && !r.expanded[s.Name]:
			detail = append(detail, "items when "+s.ForeachOf.Step+" has put "+s.ForeachOf.Name)
		}
		if attempt > 1 && state != record.Succeeded {
			detail = append(detail, AttemptOf(attempt, s.Retry+1))
		}
		shown := string(state)
		if state == record.Succeeded && slices.ContainsFunc(us, func(u *Unit) bool { return u.rec.Stubbed }) {
			shown = "stubbed"
		}
		rows = append(rows, []string{s.Name, shown, took(start, end, state.Final(), now), strings.Join(detail, ", ")})
	}
	return r.title(now, done, len(r.Flow.Steps), " steps"), nil, rows
}

// UnitView is a live view (display.Options.View) with a header and a row per
// unit: its label, state, the columns cols gives (named by header; called with
// the run's lock held, see Locked), attempt and time.
func (r *Run) UnitView(now time.Time, header []string, cols func(*Unit, record.Task) []string) (string, []string, [][]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := 0
	rows := make([][]string, 0, len(r.units))
	for _, u := range r.units {
		t := u.rec
		if t.State.Final() {
			done++
		}
		attempt := ""
		if t.Attempts > 0 {
			attempt = fmt.Sprintf("%d/%d", t.Attempts, u.Step.Retry+1)
		}
		row := append([]string{u.Label, t.Shown()}, cols(u, t)...)
		rows = append(rows, append(row, attempt, took(t.Start, t.End, t.State.Final(), now)))
	}
	head := append(append([]string{"STEP", "STATE"}, header...), "ATTEMPT", "TIME")
	return r.title(now, done, len(r.units), ""), head, rows
}

// title is the view's line for the run: done of total (noun) done, and time.
func (r *Run) title(now time.Time, done, total int, noun string) string {
	return fmt.Sprintf("run %s: %d/%d%s done, %s", r.ID, done, total, noun, display.Human(r.Rec.Took(now).Truncate(100*time.Millisecond)))
}

// took is how long a unit or step ran: from start to end once final, to now
// while it runs, "" before it starts.
func took(start, end time.Time, final bool, now time.Time) string {
	switch {
	case start.IsZero():
		return ""
	case final && !end.IsZero():
		return display.Human(end.Sub(start))
	case final:
		return ""
	}
	return display.Human(now.Sub(start).Truncate(100 * time.Millisecond))
}
