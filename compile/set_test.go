package compile_test

import (
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/sdk"
)

func TestParseSet(t *testing.T) {
	step, opt, err := compile.ParseSet("train.timeout=2h")
	if err != nil {
		t.Fatal(err)
	}
	var s sdk.StepSpec
	s.Apply(opt)
	if step != "train" || s.Timeout == nil || *s.Timeout != 2*time.Hour {
		t.Errorf("ParseSet(train.timeout=2h) = %q, timeout %v", step, s.Timeout)
	}
	for in, want := range map[string]string{
		"train.efa":        "write STEP.OPTION=VALUE",
		".efa=1":           "write STEP.OPTION=VALUE",
		"train.gpus=1":     `unknown option "gpus"; the options are cpu, disk, efa,`,
		"train.trainum=4":  `; did you mean trainium?`,
		"train.retry=two":  `"two" is not a whole number`,
		"train.timeout=6":  `"6" is not a duration`,
		"train.efa=lots":   `"lots" is not a whole number`,
		"train.efa=all":    "",
		"train.memory=1Gi": "",
	} {
		_, _, err := compile.ParseSet(in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("ParseSet(%q) error %q, want one holding %q", in, got, want)
		}
	}
}
