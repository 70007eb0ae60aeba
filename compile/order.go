package compile

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// order sorts steps so that each comes after the steps it waits for, keeping
// declaration order among steps that are free to go; a cycle is an error that names
// its steps.
func order(steps []plan.Step, at *field.Path) ([]plan.Step, field.ErrorList) {
	index := make(map[string]int, len(steps))
	for i, s := range steps {
		index[s.Name] = i
	}
	waiting := make([]int, len(steps))
	dependents := make([][]int, len(steps))
	for i, s := range steps {
		for _, a := range s.After {
			if j, ok := index[a]; ok {
				waiting[i]++
				dependents[j] = append(dependents[j], i)
			}
		}
	}
	done := make([]bool, len(steps))
	out := make([]plan.Step, 0, len(steps))
	for len(out) < len(steps) {
		// The first ready step in declaration order goes next: O(n²) in the
		// worst case, and deterministic.
		next := -1
		for i := range steps {
			if !done[i] && waiting[i] == 0 {
				next = i
				break
			}
		}
		if next < 0 {
			return nil, cycles(steps, index, done, at)
		}
		done[next] = true
		out = append(out, steps[next])
		for _, d := range dependents[next] {
			waiting[d]--
		}
	}
	return out, nil
}

// cycles reports each cycle among the steps not yet placed, once, starting from its
// first step in declaration order.
func cycles(steps []plan.Step, index map[string]int, done []bool, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	const (
		unvisited = iota
		onPath
		finished
	)
	state := make([]int, len(steps))
	var path []int
	var visit func(i int)
	visit = func(i int) {
		state[i] = onPath
		path = append(path, i)
		for _, a := range steps[i].After {
			j, ok := index[a]
			if !ok || done[j] {
				continue
			}
			switch state[j] {
			case onPath:
				start := 0
				for k, p := range path {
					if p == j {
						start = k
					}
				}
				names := make([]string, 0, len(path)-start+1)
				for _, p := range path[start:] {
					names = append(names, steps[p].Name)
				}
				names = append(names, steps[j].Name)
				errs = append(errs, field.Forbidden(at.Key(steps[j].Name).Child("after"),
					"steps wait for each other in a cycle: "+strings.Join(names, " → ")+"; remove one of these sdk.After"))
			case unvisited:
				visit(j)
			}
		}
		path = path[:len(path)-1]
		state[i] = finished
	}
	for i := range steps {
		if !done[i] && state[i] == unvisited {
			visit(i)
		}
	}
	return errs
}
