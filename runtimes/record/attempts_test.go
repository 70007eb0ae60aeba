package record_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/manifoldflow/manifold/runtimes/record"
)

func TestSplitAttempts(t *testing.T) {
	t2 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t3 := t2.Add(time.Minute)
	tests := []struct {
		name string
		log  string
		want []record.AttemptLog
	}{
		{"empty", "", nil},
		{"one attempt", "a\nb\n", []record.AttemptLog{{Attempt: 1, Data: []byte("a\nb\n")}}},
		{"no final newline", "a\nb", []record.AttemptLog{{Attempt: 1, Data: []byte("a\nb")}}},
		{"three attempts",
			"one\n" + record.AttemptMarker(2, t2) + "two\n" + record.AttemptMarker(3, t3) + "three\n",
			[]record.AttemptLog{{Attempt: 1, Data: []byte("one\n")}, {Attempt: 2, Start: t2, Data: []byte("two\n")}, {Attempt: 3, Start: t3, Data: []byte("three\n")}}},
		// A retry that printed nothing still marks where it began.
		{"silent first attempt", record.AttemptMarker(2, t2) + "two\n",
			[]record.AttemptLog{{Attempt: 2, Start: t2, Data: []byte("two\n")}}},
		{"silent second attempt", "one\n" + record.AttemptMarker(2, t2) + record.AttemptMarker(3, t3) + "three\n",
			[]record.AttemptLog{{Attempt: 1, Data: []byte("one\n")}, {Attempt: 2, Start: t2}, {Attempt: 3, Start: t3, Data: []byte("three\n")}}},
		// A resumed run's runner counts its attempts from 1 again: the earlier
		// runner's output is not its.
		{"resumed", "old\n" + record.AttemptMarker(2, t2) + "old two\n" + record.AttemptMarker(1, t3) + "new\n",
			[]record.AttemptLog{{Attempt: 1, Start: t3, Data: []byte("new\n")}}},
		{"marker-like output", "--- attempt x, now ---\n--- attempt 2, yesterday ---\n",
			[]record.AttemptLog{{Attempt: 1, Data: []byte("--- attempt x, now ---\n--- attempt 2, yesterday ---\n")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, record.SplitAttempts([]byte(tt.log))); diff != "" {
				t.Errorf("SplitAttempts (-want +got):\n%s", diff)
			}
		})
	}
}
