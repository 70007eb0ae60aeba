//go:build unix

package record_test

import (
	"errors"
	"testing"

	"github.com/manifoldflow/manifold/runtimes/record"
)

// TestLock: the lock is held by one holder at a time, and a run recorded as
// running reads as running while its lock is held, abandoned once it is not.
func TestLock(t *testing.T) {
	root, dir := mkdir(t, "held")
	lk, err := record.Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := record.WriteRecord(dir, record.Record{Flow: "f", ID: "held", State: record.Running, Start: start, Steps: []record.StepInfo{{Name: "a"}}}); err != nil {
		t.Fatal(err)
	}
	if other, err := record.Lock(dir); !errors.Is(err, record.ErrBusy) {
		if other != nil {
			other.Close()
		}
		t.Errorf("second Lock: %v, want ErrBusy", err)
	}
	if rec, err := record.ReadRecord(dir); err != nil || rec.State != record.Running {
		t.Errorf("run with its lock held reads %+v, %v; want running", rec, err)
	}
	if err := lk.Close(); err != nil {
		t.Fatal(err)
	}
	runs, err := record.List(root)
	if err != nil || len(runs) != 1 || runs[0].State != record.Abandoned {
		t.Errorf("run without its lock held lists as %+v, %v; want abandoned", runs, err)
	}
	lk, err = record.Lock(dir)
	if err != nil {
		t.Fatalf("Lock once released: %v", err)
	}
	lk.Close()
}
