package kube_test

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// TestCleanupSelectors checks how the cleanup splits a run's Jobs among
// requests made at once: every Job of the run is picked by exactly one
// selector, each selector picks only the run's objects, there are at most as
// many as asked unless the step names outgrow a request, and none at all
// where one request does (one step's foreach items, a small run).
func TestCleanupSelectors(t *testing.T) {
	items := make([]string, 50)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	foreach := sdk.NewFlow("fe", sdk.Image("example.com/flow:v1")).Step("each", sdk.Command("true"), sdk.Foreach(items...))
	for _, tc := range []struct {
		name     string
		f        *sdk.Flow
		n, bytes int
		// want is how many selectors: 0 for none, -1 for more than n.
		want int
	}{
		{"fan-out", testflows.FanOut(100), 4, 4096, 4},
		{"uneven", testflows.FanOut(10), 4, 4096, 4},
		{"small", testflows.FanOut(7), 4, 4096, 0},
		{"foreach", foreach, 4, 4096, 0},
		{"long names", testflows.FanOut(100), 4, 64, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sels, jobs, err := kube.CleanupSelectors(compileFlow(t, tc.f), "ns", tc.n, tc.bytes)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.want == -1 && len(sels) <= tc.n:
				t.Fatalf("%d selectors, want more than %d: %q", len(sels), tc.n, sels)
			case tc.want >= 0 && len(sels) != tc.want:
				t.Fatalf("%d selectors, want %d: %q", len(sels), tc.want, sels)
			}
			if len(sels) == 0 {
				return
			}
			run := jobs[0][plan.LabelRun]
			parsed := make([]labels.Selector, len(sels))
			for i, s := range sels {
				if parsed[i], err = labels.Parse(s); err != nil {
					t.Fatalf("selector %q: %v", s, err)
				}
				if names := s[strings.Index(s, "("):]; len(names) > tc.bytes+2 {
					t.Errorf("selector %q: %d bytes of step names, more than %d", s, len(names)-2, tc.bytes)
				}
				// Another run of the flow, a run of another flow under the
				// same ID, and another run under the flow and ID (one whose
				// record was lost) are not the run's.
				for what, change := range map[string]labels.Set{
					"another run's":                  {plan.LabelRun: run + "x"},
					"another flow's":                 {plan.LabelFlow: jobs[0][plan.LabelFlow] + "x"},
					"another run's of the same ID's": {plan.LabelRunUID: jobs[0][plan.LabelRunUID] + "x"},
				} {
					other := labels.Merge(labels.Set(jobs[0]), change)
					if parsed[i].Matches(other) {
						t.Errorf("selector %q picks %s object", s, what)
					}
				}
			}
			for _, l := range jobs {
				picked := 0
				for _, p := range parsed {
					if p.Matches(labels.Set(l)) {
						picked++
					}
				}
				if picked != 1 {
					t.Errorf("Job of step %s is picked by %d selectors, want 1", l[plan.LabelStep], picked)
				}
			}
		})
	}
}
