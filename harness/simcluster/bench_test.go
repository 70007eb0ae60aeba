package simcluster

import (
	"context"
	"testing"
)

// BenchmarkStart measures a cluster's start, from nothing to Ready nodes and a
// pod run, and its stop:
//
//	go test -run '^$' -bench Start -benchtime 3x ./harness/simcluster
func BenchmarkStart(b *testing.B) {
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		c, err := Start(ctx, Options{})
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		c.Stop()
		b.StartTimer()
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/start")
}
