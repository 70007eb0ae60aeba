package argo

import (
	"reflect"
	"testing"

	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
)

// TestGuessedCostsAreCounted checks that the measuring pass of a maker that
// guesses what the steps share (newGuessingMaker) gives each step the cost,
// and the head the spec, of a maker that counts every pod first: for a flow
// whose first steps are like the rest (the guess holds) and for flows whose
// first steps differ from the rest in image or service account (the guess is
// wrong, and the pass is made again).
func TestGuessedCostsAreCounted(t *testing.T) {
	alike := testflows.Compile(t, benchflow.Flow(benchflow.Chain, 1200, benchflow.Options{}))
	image := *testflows.Compile(t, benchflow.Flow(benchflow.FanOut, 1200, benchflow.Options{}))
	account := *testflows.Compile(t, benchflow.Flow(benchflow.Chain, 1200, benchflow.Options{}))
	image.Steps = append([]plan.Step(nil), image.Steps...)
	account.Steps = append([]plan.Step(nil), account.Steps...)
	// The first guessPods container steps, and a multi-node step among them.
	for i := range guessPods + guessPods/8 {
		image.Steps[i].Image = "other/image:1"
		account.Steps[i].ServiceAccount = "other"
	}
	for _, c := range []struct {
		name  string
		f     *plan.Flow
		wrong bool
	}{{"alike", alike, false}, {"image", &image, true}, {"account", &account, true}} {
		t.Run(c.name, func(t *testing.T) {
			counted := newMaker(c.f, c.f.Name, nil, RunID, false)
			guessed := newGuessingMaker(c.f, c.f.Name)
			if wrong := !reflect.DeepEqual(guessed.sh, counted.sh); wrong != c.wrong {
				t.Fatalf("the guess differs from the truth: %v, want %v", wrong, c.wrong)
			}
			want, wantFixed, errs := counted.costs(-1)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			got, gotFixed, errs := guessed.costs(-1)
			if len(errs) > 0 {
				t.Fatal(errs.ToAggregate())
			}
			if gotFixed != wantFixed || !reflect.DeepEqual(got, want) {
				t.Errorf("guessed costs differ: fixed %d, want %d; first costs %v, want %v", gotFixed, wantFixed, got[:4], want[:4])
			}
			if !reflect.DeepEqual(guessed.head(), counted.head()) || !reflect.DeepEqual(guessed.sh, counted.sh) {
				t.Errorf("the head once measured differs from the counted one's")
			}
		})
	}
}
