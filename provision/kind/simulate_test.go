package kind

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseSimulate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Group
	}{
		{"", nil},
		{"  ", nil},
		{"trn1.32xlarge=2,inf2.xlarge=1", []Group{{"trn1.32xlarge", 2}, {"inf2.xlarge", 1}}},
		{"inf2.xlarge=1,trn1.32xlarge=2", []Group{{"inf2.xlarge", 1}, {"trn1.32xlarge", 2}}}, // order kept
		{" p5.48xlarge = 1 , trn2.48xlarge=3 ", []Group{{"p5.48xlarge", 1}, {"trn2.48xlarge", 3}}},
		{"trn1.32xlarge=2,m7i.8xlarge=1", []Group{{"trn1.32xlarge", 2}, {"m7i.8xlarge", 1}}}, // a plain CPU type
	} {
		got, err := ParseSimulate(tc.in)
		if err != nil {
			t.Errorf("ParseSimulate(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParseSimulate(%q) (-want +got):\n%s", tc.in, diff)
		}
		if tc.want != nil {
			if again, err := ParseSimulate(FormatSimulate(got)); err != nil || !cmp.Equal(again, got) {
				t.Errorf("FormatSimulate(%v) = %q reads back as %v, %v", got, FormatSimulate(got), again, err)
			}
		}
	}
}

// TestParseSimulateErrors: each bad item is named, with what to do; every one
// is reported, not just the first.
func TestParseSimulateErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string // one line per error, each containing these
	}{
		{"trn9.huge=1", []string{`--simulate item "trn9.huge=1": "trn9.huge" is not an EC2 instance type; `}},
		{"trn1.32xlarg=1", []string{`--simulate item "trn1.32xlarg=1": "trn1.32xlarg" is not an EC2 instance type; did you mean trn1.32xlarge?`}},
		{"g5.xlarge=1", []string{`--simulate item "g5.xlarge=1": `, "g5.xlarge", "catalog/catalog.go"}},
		{"trn1.32xlarge=0", []string{`--simulate item "trn1.32xlarge=0": the count must be a whole number of at least 1; leave the item out to simulate no trn1.32xlarge`}},
		{"trn1.32xlarge=-2", []string{`--simulate item "trn1.32xlarge=-2": the count must be a whole number of at least 1`}},
		{"trn1.32xlarge=two", []string{`--simulate item "trn1.32xlarge=two": the count must be a whole number`}},
		{"trn1.32xlarge", []string{`--simulate item "trn1.32xlarge": write INSTANCE-TYPE=COUNT, such as trn1.32xlarge=2`}},
		{"=2", []string{`--simulate item "=2": write INSTANCE-TYPE=COUNT`}},
		{"trn1.32xlarge=2,,inf2.xlarge=1", []string{`--simulate: item 2 is empty; separate INSTANCE-TYPE=COUNT items with single commas`}},
		{"trn1.32xlarge=2,inf2.xlarge=1,trn1.32xlarge=1", []string{`--simulate item "trn1.32xlarge=1": trn1.32xlarge is given twice; give it once with the total count, such as trn1.32xlarge=3`}},
	} {
		groups, err := ParseSimulate(tc.in)
		if err == nil {
			t.Errorf("ParseSimulate(%q) = %v, want an error", tc.in, groups)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("ParseSimulate(%q): error\n%v\ndoes not say %q", tc.in, err, want)
			}
		}
		if strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("ParseSimulate(%q): one bad item gave several lines:\n%v", tc.in, err)
		}
	}

	_, err := ParseSimulate("trn9.huge=1,trn1.32xlarge=0,inf2.xlarge=1,inf2.xlarge=1")
	if err == nil {
		t.Fatal("no error for three bad items")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "trn9.huge") || !strings.Contains(lines[1], "trn1.32xlarge=0") || !strings.Contains(lines[2], "given twice") {
		t.Errorf("three bad items, error:\n%v", err)
	}
}

func TestWorkerTypes(t *testing.T) {
	got := workerTypes([]Group{{"trn1.32xlarge", 2}, {"inf2.xlarge", 1}})
	if diff := cmp.Diff([]string{"trn1.32xlarge", "trn1.32xlarge", "inf2.xlarge"}, got); diff != "" {
		t.Errorf("workerTypes (-want +got):\n%s", diff)
	}
}

func TestSameWorkers(t *testing.T) {
	groups := []Group{{"trn1.32xlarge", 2}, {"inf2.xlarge", 1}}
	recorded := map[string]string{"m-worker": "trn1.32xlarge", "m-worker2": "trn1.32xlarge", "m-worker3": "inf2.xlarge"}
	if !sameWorkers(recorded, groups) {
		t.Error("the recorded workers are those asked, yet sameWorkers is false")
	}
	if !sameWorkers(recorded, []Group{{"inf2.xlarge", 1}, {"trn1.32xlarge", 2}}) {
		t.Error("the order of groups matters to sameWorkers")
	}
	delete(recorded, "m-worker2")
	if sameWorkers(recorded, groups) {
		t.Error("one trn1 worker recorded, two asked, yet sameWorkers is true")
	}
	if !sameWorkers(map[string]string{}, nil) {
		t.Error("no simulated workers, none asked, yet sameWorkers is false")
	}
	if diff := cmp.Diff([]Group{{"inf2.xlarge", 1}, {"trn1.32xlarge", 1}}, groupsOf(recorded)); diff != "" {
		t.Errorf("groupsOf (-want +got):\n%s", diff)
	}
}
