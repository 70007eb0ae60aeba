package suggest

import "testing"

func TestOutClosest(t *testing.T) {
	for _, tc := range []struct {
		word       string
		candidates []string
		want       string
		ok         bool
	}{
		{"gret", []string{"prepare", "train", "greet"}, "greet", true},
		{"epoc", []string{"epochs", "batch"}, "epochs", true},
		{"paralel", []string{"namespace", "parallel", "image"}, "parallel", true},
		{"Trian", []string{"prepare", "train"}, "train", true},
		{"zzz", []string{"prepare", "train"}, "", false},
		{"", []string{"prepare"}, "", false},
		{"train", nil, "", false},
	} {
		got, ok := Closest(tc.word, tc.candidates)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Closest(%q, %q) = %q, %v; want %q, %v", tc.word, tc.candidates, got, ok, tc.want, tc.ok)
		}
	}
	if got := DidYouMean("epoc", []string{"epochs"}); got != "; did you mean epochs?" {
		t.Errorf("DidYouMean = %q", got)
	}
	if got := DidYouMean("zzz", []string{"epochs"}); got != "" {
		t.Errorf("DidYouMean of nothing near = %q, want empty", got)
	}
}
