package dag_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// TestChanges: a step whose spec changed, a Run step of another program build
// and a step recorded without digests run again, with every step that waits
// for one, however far down; a Command step does not run again for a new
// build, nor a step whose foreach items alone changed (they are compared one
// by one), nor a step new to the flow.
func TestChanges(t *testing.T) {
	steps := func(cmd string) []plan.Step {
		return []plan.Step{
			{Name: "a", Body: plan.BodyCommand, Command: []string{cmd}},
			{Name: "b", Body: plan.BodyRun, Command: []string{"flow", "step", "b"}},
			{Name: "c", Body: plan.BodyCommand, Command: []string{"c"}, Foreach: []string{"x"}},
			{Name: "d", Body: plan.BodyCommand, Command: []string{"d"}, After: []string{"a"}},
			{Name: "e", Body: plan.BodyCommand, Command: []string{"e"}, After: []string{"d"}},
			{Name: "f", Body: plan.BodyCommand, Command: []string{"f"}, After: []string{"c"}},
		}
	}
	infos := func(ss []plan.Step, build string) []record.StepInfo {
		var out []record.StepInfo
		for i := range ss {
			out = append(out, dag.StepInfo(&ss[i], len(ss[i].Foreach), build))
		}
		return out
	}
	prev := infos(steps("a"), "build-1")
	for _, tc := range []struct {
		name  string
		now   []record.StepInfo
		prev  []record.StepInfo
		rerun []string
		note  string
	}{
		{"same", prev, prev, nil, ""},
		{"spec", infos(steps("a2"), "build-1"), prev, []string{"a", "d", "e"}, "a (spec)"},
		{"build", infos(steps("a"), "build-2"), prev, []string{"b"}, "b (program build)"},
		{"not recorded", prev, []record.StepInfo{{Name: "a"}, prev[1], prev[2], prev[3], prev[4], prev[5]}, []string{"a", "d", "e"}, "a (not recorded)"},
		{"items", func() []record.StepInfo {
			ss := steps("a")
			ss[2].Foreach = []string{"x", "y"}
			return infos(ss, "build-1")
		}(), prev, nil, ""},
		{"new step", prev, prev[:5], nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rerun, note := dag.Changes("r1", tc.prev, tc.now)
			if got := slices.Sorted(maps.Keys(rerun)); !slices.Equal(got, tc.rerun) {
				t.Errorf("run again: %v; want %v", got, tc.rerun)
			}
			if tc.note == "" && note != "" || tc.note != "" && !strings.Contains(note, tc.note) {
				t.Errorf("note %q; want it to say %q", note, tc.note)
			}
		})
	}
}
