package doctest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAnchors(t *testing.T) {
	page := "# Manifold\n\n## Placement: one pod per node, one zone for EFA\n\n" +
		"## Building the flow's image\n\n### `manifold.toml`\n\n```sh\n# not a heading\n```\n\n" +
		"## Real nodes\n\n## Real nodes\n\n## [Linked](x.md) heading\n"
	got := Anchors(page)
	want := map[string]bool{
		"manifold": true, "placement-one-pod-per-node-one-zone-for-efa": true,
		"building-the-flows-image": true, "manifoldtoml": true,
		"real-nodes": true, "real-nodes-1": true, "linked-heading": true,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Anchors (-want +got):\n%s", diff)
	}
}

func TestMatches(t *testing.T) {
	want := []string{
		"13:40:26.555 run 20261202-134026-b17ca4 of flow hello",
		"…",
		"13:40:26.585 run 20261202-134026-b17ca4 succeeded in 38ms",
	}
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"09:01:02.003 run 20261205-090102-abcdef of flow hello\n09:01:02.004 run 20261205-090102-abcdef succeeded in 1.5s\n", true},
		{"09:01:02.003 run 20261205-090102-abcdef of flow hello\nx\ny\n09:01:02.004 run 20261205-090102-abcdef succeeded in 3ms\n", true},
		{"09:01:02.003 run 20261205-090102-abcdef of flow other\n09:01:02.004 run 20261205-090102-abcdef succeeded in 3ms\n", false},
		{"09:01:02.003 run 20261205-090102-abcdef of flow hello\n09:01:02.004 run 20261205-090102-abcdef failed\n", false},
	} {
		if got := Matches(want, c.out); got != c.want {
			t.Errorf("Matches(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

func TestBlocks(t *testing.T) {
	page := "text\n\n```sh\ngo run ./examples/hello run   # here\nmake \\\n  test\n```\n\n" +
		"<!-- doctest: skip needs a cluster -->\n\n```sh\nkubectl get pods\n```\n\n" +
		"- a list:\n\n  <!-- doctest: output -->\n  ```\n  $ echo hi\n  hi\n  ```\n\n" +
		"```go\nfunc main() {}\n```\n\n```\nnot a transcript\n```\n"
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("%d blocks, want 3: %+v", len(blocks), blocks)
	}
	if diff := cmp.Diff([]string{"go run ./examples/hello run   # here", "make   test"}, blocks[0].Commands()); diff != "" || blocks[0].Mode != Run {
		t.Errorf("first block: mode %s, commands (-want +got):\n%s", blocks[0].Mode, diff)
	}
	if blocks[1].Mode != Skip || blocks[1].Arg != "needs a cluster" {
		t.Errorf("second block: %s %q, want skip \"needs a cluster\"", blocks[1].Mode, blocks[1].Arg)
	}
	if diff := cmp.Diff([]Step{{Command: "echo hi", Output: []string{"hi"}}}, blocks[2].Transcript()); diff != "" || blocks[2].Mode != Output {
		t.Errorf("third block: mode %s, transcript (-want +got):\n%s", blocks[2].Mode, diff)
	}
	for _, bad := range []string{
		"<!-- doctest: skip -->\n```sh\nx\n```\n",             // no reason
		"<!-- doctest: output -->\n\ntext\n",                  // no block
		"<!-- doctest: runs -->\n```sh\nx\n```\n",             // unknown mode
		"<!-- doctest: output -->\n```go\nfunc f() {}\n```\n", // not a shell block
	} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Blocks(path); err == nil {
			t.Errorf("Blocks of %q: no error", bad)
		}
	}
}

func TestModuleBlocks(t *testing.T) {
	page := "<!-- doctest: module offline, go get replaced -->\n```sh\nmkdir m\ncd m\n```\n\n" +
		"<!-- doctest: file main.go -->\n```go\npackage main\n\nfunc main() {}\n```\n\n" +
		"<!-- doctest: file cmd/x/manifold.toml -->\n```\nnamespace = \"ml\"\n```\n\n" +
		"<!-- doctest: module -->\n```\n$ go run .\nhi\n```\n"
	path := filepath.Join(t.TempDir(), "page.md")
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(path)
	if err != nil {
		t.Fatal(err)
	}
	type got struct{ Mode, Arg, Lang, Text string }
	var gots []got
	for _, b := range blocks {
		gots = append(gots, got{b.Mode, b.Arg, b.Lang, b.Text()})
	}
	want := []got{
		{Module, "offline, go get replaced", "sh", "mkdir m\ncd m\n"},
		{File, "main.go", "go", "package main\n\nfunc main() {}\n"},
		{File, "cmd/x/manifold.toml", "", "namespace = \"ml\"\n"},
		{Module, "", "", "$ go run .\nhi\n"},
	}
	if diff := cmp.Diff(want, gots); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	for _, bad := range []string{
		"<!-- doctest: file -->\n```go\nx\n```\n",            // no path
		"<!-- doctest: file ../main.go -->\n```go\nx\n```\n", // leaves the module
		"<!-- doctest: file /tmp/main.go -->\n```go\nx\n```\n",
		"<!-- doctest: file ./main.go -->\n```go\nx\n```\n", // not clean
		"<!-- doctest: module -->\n```go\nfunc f() {}\n```\n",
		"<!-- doctest: file main.go -->\n\ntext\n",
	} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Blocks(path); err == nil {
			t.Errorf("Blocks of %q: no error", bad)
		}
	}
}

func TestModuleCommand(t *testing.T) {
	const mod, root = "github.com/manifoldflow/manifold", "/src/it's here"
	replace := `go mod edit -replace 'github.com/manifoldflow/manifold=/src/it'\''s here' && `
	for _, c := range []struct{ cmd, want string }{
		{"go get github.com/manifoldflow/manifold@latest", replace + "go get github.com/manifoldflow/manifold@latest"},
		{"go get -u github.com/manifoldflow/manifold/cli@v1.2.3", replace + "go get -u github.com/manifoldflow/manifold/cli@v1.2.3"},
		{"go get github.com/manifoldflow/manifold", replace + "go get github.com/manifoldflow/manifold"},
		{"go get github.com/manifoldflow/manifoldx@latest", "go get github.com/manifoldflow/manifoldx@latest"},
		{"go get example.com/other", "go get example.com/other"},
		{"go mod tidy", "go mod tidy -e"},
		{"go mod tidy -v", "go mod tidy -e -v"},
		{"go mod init example.com/myflow", "go mod init example.com/myflow"},
		{"go run . run", "go run . run"},
	} {
		if got := ModuleCommand(c.cmd, mod, root); got != c.want {
			t.Errorf("ModuleCommand(%q) = %q, want %q", c.cmd, got, c.want)
		}
	}
}

func TestModuleEnv(t *testing.T) {
	got := ModuleEnv([]string{"HOME=/h", "GOPROXY=https://proxy.golang.org,direct", "GOFLAGS=-mod=mod", "GOWORK=/w/go.work",
		"GOCACHE=/c", "GOMODCACHE=/m", "GONOSUMDB=*", "GOTOOLCHAIN=auto", "GOPROXYX=kept"})
	want := []string{"HOME=/h", "GOCACHE=/c", "GOMODCACHE=/m", "GOPROXYX=kept",
		"GOWORK=off", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ModuleEnv (-want +got):\n%s", diff)
	}
}
