package main

import (
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/targets"
)

// TestCompilesToEveryTarget: the benchmark flow is valid and every target
// writes it, so make bench measures a whole compile.
func TestCompilesToEveryTarget(t *testing.T) {
	p, errs := compile.Compile(flow, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if len(p.Steps) != 12 {
		t.Errorf("%d steps, want 12", len(p.Steps))
	}
	for _, target := range targets.All() {
		files, errs := emit.Files(target, p)
		if len(errs) > 0 {
			t.Errorf("%s: %v", target.Name(), errs.ToAggregate())
		}
		for _, f := range files {
			if len(f.Data) == 0 {
				t.Errorf("%s: %s is empty", target.Name(), f.Name)
			}
		}
	}
}
