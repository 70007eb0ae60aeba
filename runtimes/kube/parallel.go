package kube

import "sync"

// inParallel calls do(i) for every i in [0, n), up to workers calls at once,
// and returns once all have returned. One call runs on the caller's goroutine.
func inParallel(n, workers int, do func(i int)) {
	if n == 1 {
		do(0)
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
