package runid_test

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/manifoldflow/manifold/runid"
)

func TestNew(t *testing.T) {
	a := runid.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b := runid.New(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC))
	if !regexp.MustCompile(`^20260102-030405-[0-9a-f]{6}$`).MatchString(a) || a >= b {
		t.Errorf("run IDs %q, %q: want the time, then hex, sorting by time", a, b)
	}
	if err := runid.Check(a); err != nil {
		t.Error(err)
	}
}

func TestCheck(t *testing.T) {
	good := []string{"a", "default", "x-1", "20261203-071128-5a1f0e", "A.b_c-9", strings.Repeat("a", 63)}
	for _, id := range good {
		if err := runid.Check(id); err != nil {
			t.Errorf("Check(%q): %v", id, err)
		}
		// Every ID Check takes is a label value and a store directory.
		if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
			t.Errorf("Check took %q, which is no label value: %v", id, errs)
		}
		if err := runid.CheckStore(id); err != nil {
			t.Errorf("Check took %q, which CheckStore refuses: %v", id, err)
		}
	}
	bad := []string{"", ".", "..", "../x", "a/b", "-x", "x-", "x.", "_x", "x_", strings.Repeat("a", 64), "a b", "a:b", "a+b", "é"}
	for _, id := range bad {
		err := runid.Check(id)
		if err == nil {
			t.Errorf("Check(%q) = nil", id)
			continue
		}
		if id != "" && !strings.Contains(err.Error(), "beginning and ending with a letter or digit") {
			t.Errorf("Check(%q) = %v: want what a run ID may hold", id, err)
		}
	}
}

func TestCheckStore(t *testing.T) {
	for _, id := range []string{"default", "20261203-071128-5a1f0e", "hello-x7k2p", "manual__2026-12-02T14:20:32.669649+00:00", "scheduled__2026-12-03T03:00:00+00:00"} {
		if err := runid.CheckStore(id); err != nil {
			t.Errorf("CheckStore(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "a/b", `a\b`, "a\nb", strings.Repeat("x", 251)} {
		if err := runid.CheckStore(id); err == nil {
			t.Errorf("CheckStore(%q) succeeded", id)
		}
	}
}

func TestChoose(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 20, 32, 0, time.UTC)
	id, err := runid.Choose("", now)
	if err != nil || !strings.HasPrefix(id, "20261202-142032-") {
		t.Errorf(`Choose("") = %q, %v; want a fresh ID of %s`, id, err, now)
	}
	if id, err := runid.Choose("nightly-1", now); id != "nightly-1" || err != nil {
		t.Errorf(`Choose("nightly-1") = %q, %v; want it as given`, id, err)
	}
	if id, err := runid.Choose(runid.Latest, now); err == nil {
		t.Errorf("Choose(%q) = %q; want Check's error", runid.Latest, id)
	}
}
