package argo_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// triggerValues are values given to trigger --param, each with what the
// step's container gets: the value, as the kubelet expands a variable's value
// on every target ("$$" is "$", a reference to a variable that is not defined
// stays as written).
var triggerValues = []struct{ param, value, want string }{
	{"name", "{{workflow.name}}", "{{workflow.name}}"},
	{"sprig", `{{=sprig.upper("x")}}`, `{{=sprig.upper("x")}}`},
	{"inputs", "{{inputs.parameters.item}} {{ workflow.parameters.name }}", "{{inputs.parameters.item}} {{ workflow.parameters.name }}"},
	{"quotes", `"double" 'single' \back \" \n`, `"double" 'single' \back \" \n`},
	{"lines", "one\ntwo\n\tthree\r\n", "one\ntwo\n\tthree\r\n"},
	{"unicode", "ünïcödé ✓ 🚀 \u0085 \u00a0", "ünïcödé ✓ 🚀 \u0085 \u00a0"},
	{"carrier", "$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES)"},
	{"escaped", "$$(MANIFOLD_BRACES)", "$(MANIFOLD_BRACES)"},
	{"mixed", "{{$(MANIFOLD_BRACES)}} $$$(MANIFOLD_BRACES) {{=1+1}}", "{{$(MANIFOLD_BRACES)}} $$(MANIFOLD_BRACES) {{=1+1}}"},
}

// TestTriggerValuesReachPods: the values a run is given with trigger --param
// reach its step's container under Argo's real controller and executor and a
// real kubelet exactly as they reach a Job's: Argo's template tags and
// expressions, quotes, line breaks, unicode and the text of the variable that
// carries "{{" (each written to a file of a host directory, which the test
// reads back). The step fails its first run; once it may succeed, retry
// (Argo's own retry of the run, which substitutes the run's arguments again)
// gives them to the new pod the same. Values Argo cannot carry are refused
// before a Workflow is made.
func TestTriggerValuesReachPods(t *testing.T) {
	store := t.TempDir()
	script := `d=$(mktemp -d /out/run.XXXXXX)`
	for _, v := range triggerValues {
		script += ` && printf %s "$MANIFOLD_PARAM_` + strings.ToUpper(v.param) + `" >$d/` + v.param
	}
	script += ` && test -f /out/go`
	opts := []sdk.FlowOption{sdk.Image("busybox:1.37"), sdk.HostNetwork(true),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "", "NoSchedule")}
	for _, v := range triggerValues {
		opts = append(opts, sdk.Param(v.param, "default"))
	}
	flow := sdk.NewFlow("trigger-values", opts...).
		Step("write", sdk.Command("sh", "-c", script), sdk.Volume("out", "/out"))
	f := newCLI(t, flow)
	f.c.RealNode(t)
	f.c.PushBusybox(t, "busybox:1.37")
	f.c.ArgoExecutor(t, f.ns)
	f.c.HostPathClaim(t, f.ns, "out", store)
	if code, _, _ := f.run("deploy", "--target", "argo"); code != 0 {
		t.Fatalf("deploy: exit %d", code)
	}

	if code, out, stderr := f.run("trigger", "--target", "argo", "--param", "name=a\x1bb"); code == 0 || out != "" ||
		!strings.Contains(stderr, "--param name") || !strings.Contains(stderr, "U+001B") {
		t.Errorf("trigger with ESC in a value: exit %d, stdout %q, stderr %q; want a failure naming the param and the character, and no run", code, out, stderr)
	}
	if runs := names(t, f.c, argo.WorkflowGVR, f.ns, ""); len(runs) != 0 {
		t.Errorf("a refused trigger made Workflows %v", runs)
	}

	args := []string{"trigger", "--target", "argo", "--wait"}
	for _, v := range triggerValues {
		args = append(args, "--param", v.param+"="+v.value)
	}
	code, out, _ := f.run(args...)
	if code != 1 {
		t.Fatalf("trigger --wait: exit %d; want 1, the step failing its first run", code)
	}
	name := firstLine(out)
	rec, _ := readRun(t, name)
	for _, v := range triggerValues {
		if rec.Params[v.param] != v.value {
			t.Errorf("the record holds param %s = %q, want %q as given", v.param, rec.Params[v.param], v.value)
		}
	}
	checkRuns(t, store, 1)

	if err := os.WriteFile(filepath.Join(store, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := f.run("retry", "--target", "argo", "--wait", name); code != 0 {
		t.Fatalf("retry --wait: exit %d", code)
	}
	checkRuns(t, store, 2)
	if rec, _ := readRun(t, name); rec.State != record.Succeeded {
		t.Errorf("run %s after retry: %s", name, rec.State)
	}
}

// checkRuns checks that store holds the files of n runs of the step, each
// with what its container got in every param.
func checkRuns(t *testing.T, store string, n int) {
	t.Helper()
	runs, err := filepath.Glob(filepath.Join(store, "run.*"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(runs)
	if len(runs) != n {
		t.Fatalf("%d pods ran the step (%v); want %d", len(runs), runs, n)
	}
	for _, dir := range runs {
		for _, v := range triggerValues {
			data, err := os.ReadFile(filepath.Join(dir, v.param))
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(dir), err)
			} else if string(data) != v.want {
				t.Errorf("%s: the container got MANIFOLD_PARAM_%s = %q, want %q", filepath.Base(dir), strings.ToUpper(v.param), data, v.want)
			}
		}
	}
}
