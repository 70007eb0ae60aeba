package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// TestParamValuesAsGiven: a --param value reaches the flow as given, its
// leading and trailing spaces, line breaks and other white space (NEL, a
// no-break space) kept, and a comma is part of it.
func TestParamValuesAsGiven(t *testing.T) {
	t.Chdir(t.TempDir())
	flow := sdk.NewFlow("given", sdk.Image("busybox"), sdk.Param("p", "default")).
		Step("a", sdk.Command("true"))
	for _, v := range []string{" padded ", "one\ntwo\r\n", "\tx,y\u0085\u00a0", ",", ""} {
		var stdout, stderr bytes.Buffer
		if code := cli.Run(context.Background(), flow, []string{"given", "compile", "--target", "job", "--param", "p=" + v}, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("%q: exit %d; stderr:\n%s", v, code, stderr.String())
		}
		var got string
		for doc := range strings.SplitSeq(stdout.String(), "\n---\n") {
			var j batchv1.Job
			if err := yaml.Unmarshal([]byte(doc), &j); err != nil || j.Kind != "Job" {
				continue
			}
			for _, e := range j.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "MANIFOLD_PARAM_P" {
					got = e.Value
				}
			}
		}
		if got != v {
			t.Errorf("--param p=%q: the step gets MANIFOLD_PARAM_P = %q", v, got)
		}
	}
}
