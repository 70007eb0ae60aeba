package suggest

import "testing"

func TestClosest(t *testing.T) {
	steps := []string{"evaluate", "prepare", "train"}
	for _, tc := range []struct {
		word, want string
		ok         bool
	}{
		{"trian", "train", true},
		{"prepar", "prepare", true},
		{"Evaluate", "evaluate", true},
		{"evalute", "evaluate", true},
		{"zzz", "", false},
		{"", "", false},
	} {
		got, ok := Closest(tc.word, steps)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q) = %q, %v; want %q, %v", tc.word, got, ok, tc.want, tc.ok)
		}
	}
	if got, ok := Closest("x", nil); ok || got != "" {
		t.Errorf("Closest with no candidates = %q, %v", got, ok)
	}
	flags := []string{"max-parallel", "param", "run-id", "strict"}
	if got, _ := Closest("paralel", flags); got != "max-parallel" {
		t.Errorf("Closest(paralel) = %q, want max-parallel (by its tail)", got)
	}
	if got, _ := Closest("runid", flags); got != "run-id" {
		t.Errorf("Closest(runid) = %q, want run-id", got)
	}
}

func TestDidYouMean(t *testing.T) {
	if got, want := DidYouMean("trian", []string{"prepare", "train"}), "; did you mean train?"; got != want {
		t.Errorf("DidYouMean = %q, want %q", got, want)
	}
	if got := DidYouMean("qqqq", []string{"prepare", "train"}); got != "" {
		t.Errorf("DidYouMean of a far word = %q, want none", got)
	}
}
