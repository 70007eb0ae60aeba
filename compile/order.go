package compile

import (
	"container/heap"
	"fmt"
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
	// Kahn's algorithm, taking the first ready step in declaration order: the
	// ready steps wait in a min-heap of their indices, so n steps take
	// O(n log n + edges), deterministically.
	done := make([]bool, len(steps))
	out := make([]plan.Step, 0, len(steps))
	ready := &indexHeap{}
	for i := range steps {
		if waiting[i] == 0 {
			heap.Push(ready, i)
		}
	}
	for ready.Len() > 0 {
		next := heap.Pop(ready).(int)
		done[next] = true
		out = append(out, steps[next])
		for _, d := range dependents[next] {
			if waiting[d]--; waiting[d] == 0 {
				heap.Push(ready, d)
			}
		}
	}
	if len(out) < len(steps) {
		return nil, cycles(steps, index, done, at)
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
					"steps wait for each other in a cycle: "+cycleText(names)+"; remove one of these sdk.After"))
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

// indexHeap is a min-heap of step indices (container/heap).
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// maxCycleNames bounds how many steps a cycle's error names: a generated flow's
// cycle may go through thousands.
const maxCycleNames = 8

// cycleText writes a cycle's steps, first to last (the last is the first
// again), eliding the middle of a long one.
func cycleText(names []string) string {
	if len(names) <= maxCycleNames {
		return strings.Join(names, " → ")
	}
	head, tail := names[:maxCycleNames/2], names[len(names)-maxCycleNames/2:]
	return strings.Join(head, " → ") + fmt.Sprintf(" → … %d more … → ", len(names)-len(head)-len(tail)) + strings.Join(tail, " → ")
}
