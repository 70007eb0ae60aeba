package cli_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// TestParamNotUTF8: a param value that is not UTF-8 is refused, naming the
// param, however it comes: --param or -p to the commands that compile the
// flow, to trigger (before any engine is asked), and to the step command
// inside a container, from --param or from its variable. Nothing is replaced
// with U+FFFD and carried on.
func TestParamNotUTF8(t *testing.T) {
	bad := "epochs=a\xffb"
	for _, tt := range []struct {
		name string
		args []string
		env  []string
	}{
		{name: "validate --param", args: []string{"validate", "--param", bad}},
		{name: "validate -p", args: []string{"validate", "-p", bad}},
		{name: "validate --param=", args: []string{"validate", "--param=" + bad}},
		{name: "compile", args: []string{"compile", "--target", "job", "-p", bad}},
		{name: "run", args: []string{"run", "--param", bad}},
		{name: "trigger on airflow", args: []string{"trigger", "--target", "airflow", "--airflow-url", "http://127.0.0.1:1", "--param", bad}},
		{name: "trigger on argo", args: []string{"trigger", "--target", "argo", "--kubeconfig", "none", "--param", bad}},
		{name: "step --param", args: []string{"step", "-p", bad, "prepare"}},
		{name: "step's variable", args: []string{"step", "prepare"}, env: []string{"MANIFOLD_PARAM_EPOCHS", "a\xffb"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			t.Setenv("MANIFOLD_RUN_DIR", filepath.Join(t.TempDir(), "run"))
			for i := 0; i+1 < len(tt.env); i += 2 {
				t.Setenv(tt.env[i], tt.env[i+1])
			}
			var stdout, stderr bytes.Buffer
			code := cli.Run(context.Background(), trainFlow, append([]string{"trainflow"}, tt.args...), &stdout, &stderr)
			if code != cli.ExitInvalid {
				t.Errorf("exit status %d, want %d; stderr:\n%s", code, cli.ExitInvalid, stderr.String())
			}
			if !strings.Contains(stderr.String(), "params[epochs]: Invalid value: ") || !strings.Contains(stderr.String(), "must be UTF-8 text") {
				t.Errorf("stderr does not name params[epochs] and say it must be UTF-8:\n%s", stderr.String())
			}
			if strings.Contains(stdout.String(), "a\uFFFDb") || strings.Contains(stdout.String(), "prepared") {
				t.Errorf("the value was carried on:\n%s", stdout.String())
			}
		})
	}
}

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
