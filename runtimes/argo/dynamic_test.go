package argo_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/benchenv"
	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/argo"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// hostileItems are the elements of the list a Command step publishes, each
// with the MANIFOLD_ITEM its item's container must get: a string's text, any
// other value as JSON, whatever Argo's templating, expressions or the
// kubelet's $(NAME) expansion would make of it.
var hostileItems = []struct {
	item any
	want string
}{
	{"{{workflow.name}}", "{{workflow.name}}"},
	{`{{=sprig.upper("x")}}`, `{{=sprig.upper("x")}}`},
	{"{{inputs.parameters.item}} {{item}} {{ tasks.list.outputs.parameters.items }}", "{{inputs.parameters.item}} {{item}} {{ tasks.list.outputs.parameters.items }}"},
	{`"double" 'single' \back \" \n ` + "`tick`", `"double" 'single' \back \" \n ` + "`tick`"},
	{"$(HOME) $(MANIFOLD_INDEX) $$ $$(X) ${X} $", "$(HOME) $(MANIFOLD_INDEX) $$ $$(X) ${X} $"},
	{"$(MANIFOLD_BRACES) $$(MANIFOLD_BRACES) {{$(MANIFOLD_BRACES)}}", "$(MANIFOLD_BRACES) $$(MANIFOLD_BRACES) {{$(MANIFOLD_BRACES)}}"},
	{"one\ntwo\n\tthree\r\n", "one\ntwo\n\tthree\r\n"},
	{"ünïcödé ✓ 🚀 \u0085 \u00a0 \u0001", "ünïcödé ✓ 🚀 \u0085 \u00a0 \u0001"},
	{"}}{{ }} {{", "}}{{ }} {{"},
	{map[string]any{"k": "{{workflow.name}}", "n": 1}, `{"k":"{{workflow.name}}","n":1}`},
	{42, "42"},
	{"", ""},
}

// hostileSize is the value the branches compare, and the value of the branch
// not taken, which Argo's templating would make equal to it if either were
// read as a template.
const (
	hostileSize = `it's "{{workflow.name}}" $(X) $$ \ {{=1+1}} ✓`
	otherSize   = `{{workflow.name}}`
)

// TestDynamicValuesReachPods: under Argo's real controller and executor and a
// real kubelet, a Command step publishes a list ($MANIFOLD_VALUES), the next
// fans out over it (withParam), and each item's container gets its element in
// MANIFOLD_ITEM byte for byte, with its MANIFOLD_INDEX and MANIFOLD_COUNT; a
// branch on a hostile value runs, its twin on another is not taken, the
// join after both runs, and a step after the branch not taken alone is not
// taken either. The follower records one task per item and the branch
// not taken as skipped, with the dag core's reason.
func TestDynamicValuesReachPods(t *testing.T) {
	out := t.TempDir()
	var list []any
	for _, h := range hostileItems {
		list = append(list, h.item)
	}
	writeJSON(t, filepath.Join(out, "items.json"), list)
	writeJSON(t, filepath.Join(out, "size.json"), hostileSize)
	flow := sdk.NewFlow("dyn-values", sdk.Image("busybox:1.37"), sdk.HostNetwork(true), sdk.ArtifactVolume("art"),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "", "NoSchedule")).
		Step("list", sdk.Command("sh", "-c", `cp /out/items.json /out/size.json "$MANIFOLD_VALUES/"`), sdk.Volume("out", "/out")).
		Step("each", sdk.ForeachOf("list", "items"), sdk.Volume("out", "/out"), sdk.Command("sh", "-c",
			`printf %s "$MANIFOLD_ITEM" >/out/item.$MANIFOLD_INDEX && printf %s "$MANIFOLD_COUNT" >/out/count.$MANIFOLD_INDEX`)).
		Step("hit", sdk.When("list", "size", hostileSize), sdk.After("each"), sdk.Volume("out", "/out"), sdk.Command("sh", "-c", ": >/out/hit")).
		Step("miss", sdk.When("list", "size", otherSize), sdk.After("each"), sdk.Volume("out", "/out"), sdk.Command("sh", "-c", ": >/out/miss")).
		Step("join", sdk.After("hit", "miss"), sdk.Volume("out", "/out"), sdk.Command("sh", "-c", ": >/out/join")).
		Step("lonely", sdk.After("miss"), sdk.Volume("out", "/out"), sdk.Command("sh", "-c", ": >/out/lonely"))
	f := newCLI(t, flow)
	f.c.RealNode(t)
	f.c.PushBusybox(t, "busybox:1.37")
	f.c.ArgoExecutor(t, f.ns)
	f.c.HostPathClaim(t, f.ns, "out", out)
	f.c.HostPathClaim(t, f.ns, "art", t.TempDir())
	if code, _, _ := f.run("deploy", "--target", "argo"); code != 0 {
		t.Fatalf("deploy: exit %d", code)
	}
	code, stdout, _ := f.run("trigger", "--target", "argo", "--wait")
	if code != 0 {
		t.Fatalf("trigger --wait: exit %d", code)
	}
	for i, h := range hostileItems {
		if got := readOut(t, out, "item."+strconv.Itoa(i)); got != h.want {
			t.Errorf("item %d: the container got MANIFOLD_ITEM %q, want %q", i, got, h.want)
		}
		if got := readOut(t, out, "count."+strconv.Itoa(i)); got != strconv.Itoa(len(hostileItems)) {
			t.Errorf("item %d: MANIFOLD_COUNT %q, want %d", i, got, len(hostileItems))
		}
	}
	for file, want := range map[string]bool{"hit": true, "miss": false, "join": true, "lonely": false} {
		if _, err := os.Stat(filepath.Join(out, file)); (err == nil) != want {
			t.Errorf("/out/%s exists: %t, want %t", file, err == nil, want)
		}
	}
	_, tasks := readRun(t, firstLine(stdout))
	for i := range hostileItems {
		if tk, ok := tasks["each["+strconv.Itoa(i)+"]"]; !ok || tk.State != record.Succeeded {
			t.Errorf("each[%d]: recorded %v", i, tk.State)
		}
	}
	size, _ := json.Marshal(hostileSize)
	other, _ := json.Marshal(otherSize)
	wantWhy := "not taken: list's size is " + string(size) + ", and miss runs when it is " + string(other)
	if tk := tasks["miss"]; tk.State != record.Skipped || tk.Error != wantWhy {
		t.Errorf("miss: recorded %s %q, want skipped %q", tk.State, tk.Error, wantWhy)
	}
	if tk := tasks["join"]; tk.State != record.Succeeded {
		t.Errorf("join: recorded %s", tk.State)
	}
	if tk := tasks["lonely"]; tk.State != record.Skipped || tk.Error != "not taken: miss not taken" {
		t.Errorf("lonely: recorded %s %q, want skipped, not taken", tk.State, tk.Error)
	}
}

// TestDynamicTooManyItems: a list of more than eargo.MaxItems items fails
// the run under Argo's controller as soon as it is known, before any item
// runs, with a message that names the step, the limit and the count.
func TestDynamicTooManyItems(t *testing.T) {
	n := eargo.MaxItems + 1
	flow := sdk.NewFlow("dyn-many", sdk.Image("busybox:1.37"), sdk.HostNetwork(true), sdk.ArtifactVolume("art"),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "", "NoSchedule")).
		Step("list", sdk.Command("sh", "-c", `{ printf '['; seq -s, 1 `+strconv.Itoa(n)+`; printf ']'; } >"$MANIFOLD_VALUES/items.json"`)).
		Step("each", sdk.ForeachOf("list", "items"), sdk.Command("true"))
	f := newCLI(t, flow)
	f.c.RealNode(t)
	f.c.PushBusybox(t, "busybox:1.37")
	f.c.ArgoExecutor(t, f.ns)
	f.c.HostPathClaim(t, f.ns, "art", t.TempDir())
	if code, _, _ := f.run("deploy", "--target", "argo"); code != 0 {
		t.Fatalf("deploy: exit %d", code)
	}
	code, _, stderr := f.run("trigger", "--target", "argo", "--wait")
	want := "step each fans out over more than " + strconv.Itoa(eargo.MaxItems) + " items"
	if code != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "has "+strconv.Itoa(n)+" items") {
		t.Errorf("trigger --wait: exit %d, stderr %q; want 1 and a message holding %q and the count", code, stderr, want)
	}
	pods, err := f.c.Client.CoreV1().Pods(f.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "manifold.dev/step=each"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 0 {
		t.Errorf("%d pods of each ran", len(pods.Items))
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readOut(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Error(err)
		return "<none>"
	}
	return string(data)
}

// BenchmarkDynamicFanOut runs a fan-out over a list found at run time
// (MANIFOLD_BENCH_ITEMS items, 1000 unless set) as `trigger --wait` does: a
// busybox step on the real node publishes the list, each item runs on kwok
// nodes (which finish pods at once), and a join follows. It reports the wall
// time from Trigger to Follow's end, items per second, and the size of the
// ended Workflow (its status holding a node per item): what bounds the
// largest fan-out Argo's controller runs (see docs/targets.md).
//
//	MANIFOLD_BENCH_ITEMS=1000 go test -run '^$' -bench DynamicFanOut -benchtime 1x -timeout 30m ./runtimes/argo
func BenchmarkDynamicFanOut(b *testing.B) {
	items := benchenv.Int(b, "MANIFOLD_BENCH_ITEMS", 1000, 0)
	real := []sdk.StepOption{sdk.Image("busybox:1.37"), sdk.HostNetwork(true), sdk.Memory("64Mi"), sdk.CPU("100m"),
		sdk.NodeSelector(simcluster.LabelRealNode, "true"), sdk.Toleration(simcluster.LabelRealNode, "", "NoSchedule")}
	f := sdk.NewFlow("fan-bench", sdk.Image("example.com/flow:v1"), sdk.CPU("1m"), sdk.Memory("1Mi"), sdk.ArtifactVolume("art"),
		sdk.Param("n", strconv.Itoa(items))).
		Step("list", append(real, sdk.Command("sh", "-c", `{ printf '['; seq -s, 1 "$MANIFOLD_PARAM_N"; printf ']'; } >"$MANIFOLD_VALUES/items.json"`))...).
		Step("each", sdk.ForeachOf("list", "items"), sdk.Command("true")).
		Step("join", sdk.After("each"), sdk.Command("true"))
	a, c, ns := deployed(b, f, argo.Options{})
	c.RealNode(b)
	c.PushBusybox(b, "busybox:1.37")
	c.ArgoExecutor(b, ns)
	c.BoundClaim(b, ns, "art")
	ctx := context.Background()
	var wall time.Duration
	var size, packed int
	for b.Loop() {
		start := time.Now()
		name, _, err := a.Trigger(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		r, ferr := a.Follow(ctx, name)
		wall += time.Since(start)
		u, err := c.Dynamic.Resource(argo.WorkflowGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if ferr != nil || r.State != record.Succeeded {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
			b.Fatalf("run %s of %d items: %v, %v; Workflow %s: %s", name, items, r.State, ferr, phase, msg)
		}
		data, err := u.MarshalJSON()
		if err != nil {
			b.Fatal(err)
		}
		size = len(data)
		compressed, _, _ := unstructured.NestedString(u.Object, "status", "compressedNodes")
		packed = len(compressed)
	}
	// Argo's controller keeps the nodes compressed (compressedNodes: gzip,
	// base64) once the Workflow is over 1 MiB, and refuses it once that is.
	b.ReportMetric(float64(packed), "compressed-node-bytes")
	b.ReportMetric(wall.Seconds()/float64(b.N), "s/run")
	b.ReportMetric(float64(items)*float64(b.N)/wall.Seconds(), "items/s")
	b.ReportMetric(float64(size), "workflow-bytes")
}
