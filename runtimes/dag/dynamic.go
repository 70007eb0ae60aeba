package dag

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// NotTaken is the Reason recorded of a unit that did not run because its
// branch was not taken (sdk.When), or because every step it waits for was not
// taken.
const NotTaken = "NotTaken"

// Dynamic is what a run needs to run a flow whose steps fan out over, or
// branch on, values earlier steps put: where those values are, and how the
// runtime takes the units a fan-out makes.
type Dynamic struct {
	// Store holds the run's artifacts, where the values are read.
	Store artifact.Store
	// Made is given the units of a fan-out (or the one unit of a step that
	// failed to read its list, or was not taken) before they are added to
	// the run: the runtime makes its own tasks of them, and resumes them.
	Made func(us []*Unit) error
}

// NewItem returns the pending unit of item index of a step of ForeachOf,
// whose item is text (sdk.ItemText).
func NewItem(s *plan.Step, index int, text string) *Unit {
	u := &Unit{Step: s, Index: index, Item: text, rec: record.Task{Step: s.Name, State: record.Pending, Index: new(index), Item: text}}
	u.Label = u.rec.Label()
	return u
}

// Units returns the units a runtime adds for step s before the run starts:
// one, or one per item of s's static foreach; none for a fan-out over a value
// found at run time, whose units Release makes.
func Units(s *plan.Step) []*Unit {
	if s.ForeachOf != nil {
		return nil
	}
	if s.Foreach == nil {
		return []*Unit{NewUnit(s, -1)}
	}
	us := make([]*Unit, len(s.Foreach))
	for i := range s.Foreach {
		us[i] = NewUnit(s, i)
	}
	return us
}

// Count returns how many items u's step has: its static foreach's, or for a
// fan-out over a run-time value, how many its list made; 0 for a whole step.
func (r *Run) Count(u *Unit) int {
	if u.Index < 0 {
		return 0
	}
	if u.Step.ForeachOf == nil {
		return len(u.Step.Foreach)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.steps[u.Step.Name])
}

// store returns a step's view of the run's store, which reads the values
// as a step's Get and List do.
func (r *Run) store(ref plan.ValueRef) (*sdk.Context, error) {
	if r.Dynamic.Store == nil {
		return nil, fmt.Errorf("the run has no artifact store to read artifact %q of step %s from", ref.Name, ref.Step)
	}
	return sdk.NewContext(context.Background(), sdk.ContextConfig{Flow: r.Flow.Name, Index: -1, Store: r.Dynamic.Store}), nil
}

// value reads the JSON of the value ref names.
func (r *Run) value(ref plan.ValueRef) ([]byte, error) {
	c, err := r.store(ref)
	if err != nil {
		return nil, err
	}
	var raw json.RawMessage
	if err := c.Get(ref.Step, ref.Name, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// taken reads the value step s branches on and says whether s runs, and if
// not, why.
func (r *Run) taken(s *plan.Step) (bool, string, error) {
	c := sdk.Condition{ValueRef: sdk.ValueRef{Step: s.When.Ref.Step, Name: s.When.Ref.Name}, Value: s.When.Value}
	data, err := r.value(s.When.Ref)
	if err != nil {
		return false, "", err
	}
	ok, err := c.Matches(data)
	if err != nil || ok {
		return ok, "", err
	}
	return false, fmt.Sprintf("%s's %s is %s, and %s runs when it is %s", c.Step, c.Name, clip(data), s.Name, c.Value), nil
}

// expand makes the units of step s's fan-out from the list it reads.
func (r *Run) expand(s *plan.Step) ([]*Unit, error) {
	c, err := r.store(*s.ForeachOf)
	if err != nil {
		return nil, err
	}
	list, err := c.List(sdk.ValueRef{Step: s.ForeachOf.Step, Name: s.ForeachOf.Name})
	if err != nil {
		return nil, err
	}
	us := make([]*Unit, len(list))
	for i, item := range list {
		us[i] = NewItem(s, i, sdk.ItemText(item))
		us[i].ItemJSON = item
	}
	return us, nil
}

// dynamicRelease is what Release does with step s once the steps it waits for
// have ended so that it may start: it returns the units to start, having
// skipped s when its branch is not taken (or every step it waits for was not),
// made the units of its fan-out, or failed it when its value cannot be read.
func (r *Run) dynamicRelease(s *plan.Step) (ready []*Unit, done bool) {
	if len(s.After) > 0 && r.allNotTaken(s.After) {
		r.notTake(s, "not taken: "+strings.Join(s.After, ", ")+" not taken")
		return nil, true
	}
	if s.When != nil {
		ok, why, err := r.taken(s)
		if err != nil {
			r.failStep(s, fmt.Sprintf("reading the value of sdk.When: %v", err))
			return nil, true
		}
		if !ok {
			r.notTake(s, "not taken: "+why)
			return nil, true
		}
	}
	if s.ForeachOf == nil {
		return nil, false
	}
	us, err := r.expand(s)
	if err != nil {
		r.failStep(s, fmt.Sprintf("reading the items of sdk.ForeachOf: %v", err))
		return nil, true
	}
	if err := r.made(us); err != nil {
		r.failStep(s, err.Error())
		return nil, true
	}
	r.mu.Lock()
	r.expanded[s.Name] = true
	r.touched[s.Name] = true // no item: its state changed all the same
	for i := range r.Rec.Steps {
		if r.Rec.Steps[i].Name == s.Name {
			r.Rec.Steps[i].Items = len(us)
		}
	}
	err = record.WriteRecord(r.Dir, r.Rec)
	if err != nil && r.writeErr == nil {
		r.writeErr = err
	}
	r.mu.Unlock()
	r.Add(us...)
	for _, u := range us {
		if u.Earlier {
			r.Disp.Event(u.Label, false, "succeeded in an earlier attempt of this run: not run again")
			continue
		}
		ready = append(ready, u)
	}
	return ready, true
}

// made gives new units to the runtime.
func (r *Run) made(us []*Unit) error {
	if r.Dynamic.Made == nil {
		return nil
	}
	return r.Dynamic.Made(us)
}

// allNotTaken reports whether every step of steps was not taken.
func (r *Run) allNotTaken(steps []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range steps {
		if !r.notTaken[a] {
			return false
		}
	}
	return true
}

// notTake skips step s, not taken for why: its pending units, or, for a
// fan-out yet to be made, one unit of the whole step.
func (r *Run) notTake(s *plan.Step, why string) {
	r.mu.Lock()
	r.notTaken[s.Name] = true
	r.mu.Unlock()
	r.wholeStep(s)
	for _, u := range r.steps[s.Name] {
		if r.Task(u).State != record.Pending {
			continue
		}
		r.Update(u, func(t *record.Task) { t.State, t.Error, t.Reason = record.Skipped, why, NotTaken })
		r.Disp.Event(u.Label, false, "%s", why)
	}
}

// failStep fails step s with msg: its pending units, or, for a fan-out yet
// to be made, one unit of the whole step.
func (r *Run) failStep(s *plan.Step, msg string) {
	r.wholeStep(s)
	for _, u := range r.steps[s.Name] {
		if r.Task(u).State == record.Pending {
			r.Fail(u, msg, "", nil)
		}
	}
}

// wholeStep gives a fan-out yet to be made one unit of the whole step, to
// record and show how it ended without items.
func (r *Run) wholeStep(s *plan.Step) {
	if s.ForeachOf == nil || r.expandedStep(s.Name) {
		return
	}
	u := NewUnit(s, -1)
	if r.made([]*Unit{u}) != nil {
		return
	}
	r.mu.Lock()
	r.expanded[s.Name] = true
	r.mu.Unlock()
	r.Add(u)
}

func (r *Run) expandedStep(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.expanded[name]
}

// clip returns data for a message, cut to 80 bytes.
func clip(data []byte) string {
	s := string(data)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
