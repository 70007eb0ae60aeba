package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/s3test"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/sdk"
)

// valuesFlowSource is a flow program whose list step publishes items and a
// choice that Jinja, the kubelet's $(NAME) expansion or Python quoting would
// change if any of them took them as code; each item puts what its pod's
// environment holds, and taken runs only when the choice is what list put.
const valuesFlowSource = `package main

import (
	"os"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

var items = []any{
	"{{ 7*7 }}",
	"{% raw %}{{ params }}{% endraw %}",
	"\"double\" 'single' \\back",
	"two\nlines\n",
	"$(MANIFOLD_PARAM_N) $(MANIFOLD_INDEX) $$ $X",
	"naïve — 日本語 🎉",
	map[string]any{"k": "{{ v }}", "n": 1.5},
	"",
}

const choice = "{{ 7*7 }} $(X) \"q\"\n"

var flow = sdk.NewFlow("values", sdk.Image("registry.example.com/values:v1"), sdk.Param("n", "{{ 7*7 }}")).
	Step("list", sdk.Run(func(ctx *sdk.Context) error {
		if err := ctx.Put("items", items); err != nil {
			return err
		}
		return ctx.Put("choice", choice)
	})).
	Step("each", sdk.Run(func(ctx *sdk.Context) error {
		return ctx.Put("env", map[string]string{"item": os.Getenv("MANIFOLD_ITEM"), "index": os.Getenv("MANIFOLD_INDEX"),
			"count": os.Getenv("MANIFOLD_COUNT"), "param": ctx.Param("n"), "ctxItem": ctx.Item()})
	}), sdk.ForeachOf("list", "items")).
	Step("taken", sdk.Run(func(ctx *sdk.Context) error { return ctx.Put("ran", true) }), sdk.When("list", "choice", choice)).
	Step("other", sdk.Run(func(ctx *sdk.Context) error { return ctx.Put("ran", true) }), sdk.When("list", "choice", "x"))

func main() { cli.Main(flow) }
`

// valuesItems are valuesFlowSource's items as each reaches its step
// (sdk.ItemText).
var valuesItems = []string{
	"{{ 7*7 }}", "{% raw %}{{ params }}{% endraw %}", `"double" 'single' \back`, "two\nlines\n",
	"$(MANIFOLD_PARAM_N) $(MANIFOLD_INDEX) $$ $X", "naïve — 日本語 🎉", `{"k":"{{ v }}","n":1.5}`, "",
}

// buildValuesFlow builds valuesFlowSource in a workspace of the module, and
// its image, pushed to c's loopback registry.
func buildValuesFlow(t *testing.T, c *simcluster.Cluster) *dynamicCluster {
	t.Helper()
	root := exampletest.Root()
	work, env := exampletest.Workspace(t)
	dir := filepath.Join(work, "flow")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	if goVersion == nil {
		t.Fatal("no go directive in go.mod")
	}
	for path, content := range map[string]string{
		filepath.Join(dir, "go.mod"):           fmt.Sprintf("module example.com/values\n\ngo %s\n", goVersion[1]),
		filepath.Join(dir, "main.go"):          valuesFlowSource,
		filepath.Join(dir, compile.ConfigFile): realNodeConfig,
		filepath.Join(work, "go.work"):         fmt.Sprintf("go %s\n\nuse (\n\t%s\n\t./flow\n)\n", goVersion[1], root),
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := c.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	d := &dynamicCluster{c: c, node: c.RealNode(t), srv: s3test.Start(t), bin: filepath.Join(t.TempDir(), "values"), work: dir, env: env}
	for _, args := range [][]string{
		{"go", "build", "-o", d.bin, "."},
		{d.bin, "image", "build", "--tag", reg.Host + "/flows/values:real", "--push"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if d.built, err = built.Read(filepath.Join(dir, built.File)); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRealDynamicAirflowValues runs, under Airflow on the real node, a flow
// that fans out over items and branches on a value that Jinja, the kubelet's
// $(NAME) expansion and Python quoting would each change if they took them
// as code: each item's pod has, in MANIFOLD_ITEM, its item byte for byte
// (what the step read from the store, too), its index and the count; the
// param, whose default is a template, is its text; the branch on the hostile
// value runs, the other is skipped.
func TestRealDynamicAirflowValues(t *testing.T) {
	c := simcluster.Shared(t)
	c.PushBusybox(t, xcomSidecarImage)
	d := buildValuesFlow(t, c)
	e, ns := d.onClusterFlow(t, "values", []string{"list", "each", "taken", "other"}, "dynamic-values")
	r := runAirflowDynamic(t, c, ns, e)
	if r.state != "success" {
		t.Fatalf("DAG run ended %q: %v\n%s", r.state, r.states, r.log)
	}
	if got := r.states["other"]; len(got) != 1 || got[0] != "skipped" {
		t.Errorf("other: states %v, want [skipped]", got)
	}
	got := d.artifacts(t, "values", "dynamic-values", r.id)
	if _, ok := got["taken/ran.json"]; !ok {
		t.Errorf("taken, whose value matches, did not run: %v", slices.Sorted(maps.Keys(got)))
	}
	for i, item := range valuesItems {
		var env map[string]string
		data, ok := got["each/"+strconv.Itoa(i)+"/env.json"]
		if !ok || json.Unmarshal(data, &env) != nil {
			t.Errorf("item %d put no environment: %q", i, data)
			continue
		}
		want := map[string]string{"item": item, "ctxItem": item, "index": strconv.Itoa(i), "count": strconv.Itoa(len(valuesItems)), "param": "{{ 7*7 }}"}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("item %d: %s = %q, want %q", i, k, env[k], v)
			}
		}
	}
	if sdk.ItemText(json.RawMessage(`{"k":"{{ v }}","n":1.5}`)) != valuesItems[6] {
		t.Fatal("valuesItems is not what the items reach their steps as")
	}
}
