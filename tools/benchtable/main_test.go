package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFindBenchmarks: a benchmark counts when it reports a goal's metric itself,
// in a closure, or through a helper of its package; one that reports other
// metrics, a nested module's and testdata's do not.
func TestFindBenchmarks(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod": "module example.com/m\n",
		"a/a_test.go": `package a

import "testing"

func BenchmarkItself(b *testing.B) { b.ReportMetric(1, "s/chain100") }

func BenchmarkClosure(b *testing.B) {
	b.Run("sub", func(b *testing.B) { b.ReportMetric(1, "s/build-warm") })
}

func BenchmarkHelper(b *testing.B) { helper(b) }

func helper(b *testing.B) {
	b.ReportMetric(1, "ms/step-overhead")
	b.ReportMetric(2, "s/chain100")
}

func BenchmarkOther(b *testing.B) { b.ReportMetric(1, "ns/step") }
`,
		"a/b/b_test.go":        "package b\n\nimport \"testing\"\n\nfunc BenchmarkDeep(b *testing.B) { b.ReportMetric(1, \"binary-MB\") }\n",
		"nested/go.mod":        "module example.com/nested\n",
		"nested/n_test.go":     "package n\n\nimport \"testing\"\n\nfunc BenchmarkNested(b *testing.B) { b.ReportMetric(1, \"binary-MB\") }\n",
		"a/testdata/t_test.go": "package t\n\nimport \"testing\"\n\nfunc BenchmarkData(b *testing.B) { b.ReportMetric(1, \"binary-MB\") }\n",
		"c/not_a_test_file.go": "package c\n\nfunc BenchmarkX() {}\n",
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	metrics := map[string]bool{"s/chain100": true, "s/build-warm": true, "ms/step-overhead": true, "binary-MB": true}
	got, err := findBenchmarks(".", metrics)
	if err != nil {
		t.Fatal(err)
	}
	want := []benchmark{
		{pkg: "./a", name: "Itself", metrics: []string{"s/chain100"}},
		{pkg: "./a", name: "Closure", metrics: []string{"s/build-warm"}},
		{pkg: "./a", name: "Helper", metrics: []string{"ms/step-overhead", "s/chain100"}},
		{pkg: "./a/b", name: "Deep", metrics: []string{"binary-MB"}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(benchmark{})); diff != "" {
		t.Errorf("benchmarks (-want +got):\n%s", diff)
	}
}
