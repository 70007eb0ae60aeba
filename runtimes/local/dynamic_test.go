package local_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/runtimes/local"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDynamicCommandSteps: a Command step writes a JSON list as an artifact,
// the next fans out over it with each element as MANIFOLD_ITEM (a string as
// its text, any other value as JSON, "{{", quotes, a newline and unicode
// exactly), its MANIFOLD_INDEX and MANIFOLD_COUNT; a branch on a number runs,
// the other is not taken, and the join runs. A resume after an item failed
// runs only that item, and what waits for it.
func TestDynamicCommandSteps(t *testing.T) {
	counts := t.TempDir()
	broken := filepath.Join(counts, "broken")
	if err := os.WriteFile(broken, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	list := `["a", {"k": "{{x}}"}, "it's \"q\"\nnext", "日本", 7]`
	flow := sdk.NewFlow("dyncmd", sdk.Image("registry.example.com/dyn:v1"), sdk.Env("COUNTS", counts), sdk.Env("BROKEN", broken)).
		Step("list", sdk.Command("sh", "-c", `printf '%s' "$LIST" > "$MANIFOLD_ARTIFACTS/items.json"; echo 2 > "$MANIFOLD_ARTIFACTS/n.json"`), sdk.Env("LIST", list)).
		Step("each", sdk.ForeachOf("list", "items"), sdk.Command("sh", "-c",
			countCmd("each$MANIFOLD_INDEX")+`; printf '%s|%s|%s' "$MANIFOLD_ITEM" "$MANIFOLD_INDEX" "$MANIFOLD_COUNT" > "$MANIFOLD_ARTIFACTS/seen"; [ "$MANIFOLD_INDEX" != 3 ] || [ ! -e "$BROKEN" ]`)).
		Step("two", sdk.When("list", "n", 2), sdk.After("each"), sdk.Command("sh", "-c", countCmd("two"))).
		Step("three", sdk.When("list", "n", 3), sdk.After("each"), sdk.Command("sh", "-c", countCmd("three"))).
		Step("join", sdk.After("two", "three"), sdk.Command("sh", "-c", countCmd("join")))
	root := t.TempDir()
	first := runPlan(t, t.Context(), compileFlow(t, flow, nil), local.Options{Root: root})
	if first.err == nil || !strings.Contains(first.err.Error(), "each[3] failed") {
		t.Fatalf("first run: %v\n%s", first.err, first.stdout)
	}
	want := []string{"a|0|5", `{"k":"{{x}}"}|1|5`, "it's \"q\"\nnext|2|5", "日本|3|5", "7|4|5"}
	for i, w := range want {
		if i == 3 {
			continue
		}
		if got := readFile(t, first.artifactDir("each", i), "seen"); got != w {
			t.Errorf("each[%d] saw %q, want %q", i, got, w)
		}
	}
	if err := os.Remove(broken); err != nil {
		t.Fatal(err)
	}
	second := runPlan(t, t.Context(), compileFlow(t, flow, nil), local.Options{Root: root, RunID: first.res.ID})
	if second.err != nil {
		t.Fatalf("resumed run: %v\n%s", second.err, second.stdout)
	}
	if got := readFile(t, first.artifactDir("each", 3), "seen"); got != want[3] {
		t.Errorf("each[3] saw %q, want %q", got, want[3])
	}
	for name, n := range map[string]int{"each0": 1, "each3": 2, "each4": 1, "two": 1, "three": 0, "join": 1} {
		if got := times(t, counts, name); got != n {
			t.Errorf("%s ran %d times, want %d", name, got, n)
		}
	}
	_, tasks := second.tasks(t)
	if th := tasks["three"]; th.State != record.Skipped || th.Error != `not taken: list's n is 2, and three runs when it is 3` {
		t.Errorf("three: %s %q", th.State, th.Error)
	}
	if len(tasks) != 9 {
		t.Errorf("the record has %d tasks, want 9 (list, 5 items, two, three, join): %v", len(tasks), tasks)
	}
}

// TestPublishedValues: a step whose value a later step fans out over or
// branches on gets MANIFOLD_VALUES, its artifact directory, so the file a
// Command step writes there is both what the fan-out reads and its artifact;
// a step that publishes nothing does not get it.
func TestPublishedValues(t *testing.T) {
	flow := sdk.NewFlow("published", sdk.Image("registry.example.com/dyn:v1")).
		Step("list", sdk.Command("sh", "-c", `[ "$MANIFOLD_VALUES" = "$MANIFOLD_ARTIFACTS" ] && printf '["x","y"]' > "$MANIFOLD_VALUES/items.json"`)).
		Step("each", sdk.ForeachOf("list", "items"), sdk.Command("sh", "-c", `printf '%s:%s' "$MANIFOLD_ITEM" "${MANIFOLD_VALUES-unset}" > "$MANIFOLD_ARTIFACTS/seen"`))
	got := runPlan(t, t.Context(), compileFlow(t, flow, nil), local.Options{Root: t.TempDir()})
	if got.err != nil {
		t.Fatalf("run: %v\n%s", got.err, got.stdout)
	}
	for i, w := range []string{"x:unset", "y:unset"} {
		if s := readFile(t, got.artifactDir("each", i), "seen"); s != w {
			t.Errorf("each[%d] saw %q, want %q", i, s, w)
		}
	}
}
