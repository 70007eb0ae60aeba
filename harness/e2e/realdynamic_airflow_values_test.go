package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/runtimes/record"
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
// its image, pushed to c's loopback registry; it returns the program and what
// the image build recorded.
func buildValuesFlow(t *testing.T, c *simcluster.Cluster) (string, built.Record) {
	t.Helper()
	root := exampletest.Root()
	work, env := exampletest.Workspace(t)
	dir := filepath.Join(work, "flow")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goVersion := exampletest.GoVersion(t)
	for path, content := range map[string]string{
		filepath.Join(dir, "go.mod"):           fmt.Sprintf("module example.com/values\n\ngo %s\n", goVersion),
		filepath.Join(dir, "main.go"):          valuesFlowSource,
		filepath.Join(dir, compile.ConfigFile): realNodeConfig,
		filepath.Join(work, "go.work"):         fmt.Sprintf("go %s\n\nuse (\n\t%s\n\t./flow\n)\n", goVersion, root),
	} {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := c.Registry(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "values")
	for _, args := range [][]string{
		{"go", "build", "-o", bin, "."},
		{bin, "image", "build", "--tag", reg.Host + "/flows/values:real", "--push"},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	b, err := built.Read(filepath.Join(dir, built.File))
	if err != nil {
		t.Fatal(err)
	}
	return bin, b
}

// values deploys, to the Airflow a, a flow that fans out over items and
// branches on a value that Jinja, the kubelet's $(NAME) expansion and Python
// quoting would each change if they took them as code, and runs it: each
// item's pod has, in MANIFOLD_ITEM, its item byte for byte (what the step
// read from the store, too), its index and the count; the param, whose
// default is a template, is its text; the branch on the hostile value runs,
// the other is skipped.
func (d *dynamicSetup) values(t *testing.T, a *dynamicAirflow) {
	bin, b := buildValuesFlow(t, d.c)
	e := &example{Name: "values", bin: bin, args: slices.Clone(a.store.args)}
	e.config = a.store.config + "entrypoint = \"" + b.Entrypoint + "\"\n" + realNodeConfig
	for _, s := range []string{"list", "each", "taken", "other"} {
		e.args = append(e.args, "--set", s+".image="+b.Reference)
	}
	rec, tasks, _ := a.with(t, e).trigger(t, nil)
	if rec.State != record.Succeeded {
		t.Fatalf("run %s: %s (%s)", rec.ID, rec.State, rec.Error)
	}
	if tk := tasks["other"]; tk.State != record.Skipped || tk.Reason != "NotTaken" {
		t.Errorf("other: %s, reason %q; want skipped, NotTaken", tk.State, tk.Reason)
	}
	got := map[string][]byte{}
	for key, data := range a.store.read(t) {
		if rest, ok := strings.CutPrefix(key, "values/"+rec.ID+"/"); ok {
			got[rest] = data
		}
	}
	if _, ok := got["taken/ran.json"]; !ok {
		t.Errorf("taken, whose value matches, did not run: %v", slices.Sorted(maps.Keys(got)))
	}
	for i, item := range valuesItems {
		if tk := tasks["each["+strconv.Itoa(i)+"]"]; tk.State != record.Succeeded || tk.Item != item {
			t.Errorf("each[%d]: %s, item %q; want succeeded, %q", i, tk.State, tk.Item, item)
		}
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
