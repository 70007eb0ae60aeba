package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/exampletest"
)

// BenchmarkImageBuild times `<flow> image build --base scratch --tarball FILE`
// as a whole process, warm: the hello example's source copied into a module of
// a workspace of this one, with the image cache of a fresh cache directory
// (the Go build cache stays the machine's). unchanged builds the same source
// again (s/build-warm); one-file-changed changes one file of the flow's main
// package before each build (s/build-changed), so go build compiles it and links
// the program again.
func BenchmarkImageBuild(b *testing.B) {
	root := exampletest.Root()
	work, env := exampletest.Workspace(b)
	flow := filepath.Join(work, "flow")
	if err := os.MkdirAll(flow, 0o755); err != nil {
		b.Fatal(err)
	}
	goVersion := exampletest.GoVersion(b)
	main, err := os.ReadFile(filepath.Join(root, "examples", "hello", "main.go"))
	if err != nil {
		b.Fatal(err)
	}
	files := map[string]string{
		filepath.Join(flow, "go.mod"):  fmt.Sprintf("module example.com/flow\n\ngo %s\n", goVersion),
		filepath.Join(flow, "main.go"): string(main),
		filepath.Join(work, "go.work"): fmt.Sprintf("go %s\n\nuse (\n\t%s\n\t./flow\n)\n", goVersion, root),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	change := func(n int) {
		src := fmt.Sprintf("package main\n\nimport \"os\"\n\nfunc init() {\n\tif os.Getenv(\"MANIFOLD_BENCH_CHANGE\") == \"%d\" {\n\t\tprintln(%d)\n\t}\n}\n", n, n)
		if err := os.WriteFile(filepath.Join(flow, "change.go"), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	change(0)

	goCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		b.Fatal(err)
	}
	env = append(env, "XDG_CACHE_HOME="+b.TempDir(), "GOCACHE="+strings.TrimSpace(string(goCache)))
	bin := filepath.Join(b.TempDir(), "hello")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir, build.Env = flow, env
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the flow: %v\n%s", err, out)
	}
	imageBuild := func() {
		b.Helper()
		cmd := exec.Command(bin, "image", "build", "--base", "scratch", "--tarball", "hello.tar")
		cmd.Dir, cmd.Env = flow, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("image build: %v\n%s", err, out.Bytes())
		}
	}
	imageBuild() // fills the cache

	b.Run("unchanged", func(b *testing.B) {
		start := time.Now()
		for b.Loop() {
			imageBuild()
		}
		b.ReportMetric(time.Since(start).Seconds()/float64(b.N), "s/build-warm")
	})
	b.Run("one-file-changed", func(b *testing.B) {
		n := 0
		var spent time.Duration
		for b.Loop() {
			n++
			b.StopTimer()
			change(n)
			b.StartTimer()
			start := time.Now()
			imageBuild()
			spent += time.Since(start)
		}
		b.ReportMetric(spent.Seconds()/float64(b.N), "s/build-changed")
	})
}
