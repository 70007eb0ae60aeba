// Command benchtable prints every performance goal of Manifold against its
// measured figure, in one table (make bench), and exits non-zero when a figure
// misses its goal.
//
// The figures are the custom metrics of Go benchmarks (b.ReportMetric), agreed
// by name: each goal names its metric, such as s/build-warm or s/chain100.
// benchtable finds the benchmarks that report them by reading the module's test
// files (a Benchmark function that reports the metric itself, in a closure, or
// through a helper of its package), runs them with go test -bench, and reads
// their output; so a benchmark added anywhere in the module counts as soon as it
// reports the goal's metric. The other custom metrics of the benchmarks it ran
// follow the goals, without one.
//
// With -load (make bench-load) it also runs run --kube's load benchmarks on a
// simulated cluster of their own, sized for load (runtimes/kube
// BenchmarkRunAtScale, simcluster.LoadControlPlane: a 1,000-step fan-out, a
// 100-step chain and 10,000 foreach items, the first two also under Argo's
// controller), which take more than an hour and the cluster's programs (make
// sim-tools). -markdown prints the table as Markdown, for docs/performance.md.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

var (
	load      = flag.Bool("load", false, "also run run --kube's load benchmarks on the simulated cluster (more than an hour)")
	markdown  = flag.Bool("markdown", false, "print the table as Markdown")
	benchtime = flag.String("benchtime", "5x", "go test -benchtime for the benchmarks of the goals")
	list      = flag.Bool("list", false, "print the benchmarks that report each goal's metric, and run nothing")
)

// goal is a figure's goal: the metric a benchmark reports, at most (or, with
// atLeast, at least) limit.
type goal struct {
	metric  string
	what    string
	limit   float64
	atLeast bool
	// loadOnly: only make bench-load measures it.
	loadOnly bool
}

// goals are the goals of the performance work, in the order the table prints
// them.
var goals = []goal{
	{metric: "start-ratio", what: "flow program start (--help, validate, compile, step) ÷ a Go hello world's", limit: 3},
	{metric: "binary-MB", what: "flow program size", limit: 40},
	{metric: "ms/compile", what: "12-step flow → all four targets, wall", limit: 8},
	{metric: "s/compile", what: "10,000 steps → all four targets, wall", limit: 0.5},
	{metric: "peak-MB", what: "10,000 steps → all four targets, peak memory", limit: 150},
	{metric: "s/build-warm", what: "image build, warm, source unchanged", limit: 2},
	{metric: "s/build-changed", what: "image build, warm, one file changed", limit: 2},
	{metric: "steps/s", what: "run --kube, 1,000-step fan-out on kwok nodes", limit: 20, atLeast: true, loadOnly: true},
	{metric: "s/chain100", what: "local run of a 100-step chain, wall", limit: 1},
	{metric: "ms/step-overhead", what: "local runner overhead per step", limit: 5},
}

func main() {
	flag.Parse()
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// row is one figure, against its goal when it has one.
type row struct {
	figure, measured, goal, holds string
}

func run(stdout io.Writer) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return fmt.Errorf("run it in the module's root directory (make bench): %w", err)
	}
	metrics := map[string]bool{}
	for _, g := range goals {
		if !g.loadOnly {
			metrics[g.metric] = true
		}
	}
	found, err := findBenchmarks(".", metrics)
	if err != nil {
		return err
	}
	if *list {
		for _, b := range found {
			fmt.Fprintf(stdout, "%s Benchmark%s: %s\n", b.pkg, b.name, strings.Join(b.metrics, ", "))
		}
		return nil
	}

	res := results{}
	byPkg := map[string][]string{}
	var pkgs []string
	for _, b := range found {
		if byPkg[b.pkg] == nil {
			pkgs = append(pkgs, b.pkg)
		}
		byPkg[b.pkg] = append(byPkg[b.pkg], b.name)
	}
	for _, pkg := range pkgs {
		fmt.Fprintf(os.Stderr, "running %s in %s…\n", strings.Join(byPkg[pkg], ", "), pkg)
		if err := res.bench(pkg, "-bench", "^Benchmark("+strings.Join(byPkg[pkg], "|")+")$", "-benchtime", *benchtime, "-timeout", "30m"); err != nil {
			return err
		}
	}
	var loadRows []row
	if *load {
		if loadRows, err = res.loadBenchmarks(); err != nil {
			return err
		}
	}

	var rows []row
	for _, g := range goals {
		bound := fmt.Sprintf("≤ %s", num(g.limit))
		if g.atLeast {
			bound = fmt.Sprintf("≥ %s", num(g.limit))
		}
		bound += " " + g.metric
		names := res.reporting(g.metric)
		if len(names) == 0 {
			measured := "not measured: no benchmark reports " + g.metric
			if g.loadOnly && !*load {
				measured = "see make bench-load"
			}
			rows = append(rows, row{g.what, measured, bound, "—"})
			continue
		}
		for _, name := range names {
			v := res[name][g.metric]
			holds := yes(g.atLeast && v >= g.limit || !g.atLeast && v <= g.limit)
			rows = append(rows, row{g.what + " (" + name + ")", num(v) + " " + g.metric, bound, holds})
		}
	}
	// The other figures of the benchmarks that were run.
	isGoal := map[string]bool{}
	for _, g := range goals {
		isGoal[g.metric] = true
	}
	for _, name := range res.names() {
		for _, unit := range slices.Sorted(maps.Keys(res[name])) {
			if isGoal[unit] || standardUnits[unit] {
				continue
			}
			rows = append(rows, row{name, num(res[name][unit]) + " " + unit, "", ""})
		}
	}
	rows = append(rows, loadRows...)

	if err := printTable(stdout, rows); err != nil {
		return err
	}
	if avg, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Fprintf(stdout, "\nload average during the run: %s", avg)
	}
	failed := 0
	for _, r := range rows {
		if r.holds == "NO" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d figures miss their goals", failed)
	}
	return nil
}

// standardUnits are go test's own metrics, not figures of a goal.
var standardUnits = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}

func printTable(w io.Writer, rows []row) error {
	header := row{"figure", "measured", "goal", "met?"}
	if *markdown {
		fmt.Fprintln(w, "| figure | measured | goal | met? |")
		fmt.Fprintln(w, "|---|---|---|---|")
		for _, r := range rows {
			fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.figure, r.measured, r.goal, r.holds)
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range append([]row{header}, rows...) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.figure, r.measured, r.goal, r.holds)
	}
	return tw.Flush()
}

// num prints v with three significant digits, without exponent.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'g', 3, 64)
	if strings.ContainsAny(s, "e") {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return s
}

// benchmark is a Benchmark function that reports some of the goals' metrics.
type benchmark struct {
	pkg     string // ./dir
	name    string // without "Benchmark"
	metrics []string
}

// findBenchmarks reads the test files of the module at root (not those of the
// modules nested in it, nor testdata) and returns the Benchmark functions that
// report one of metrics with b.ReportMetric: in their own body, in a closure
// there (b.Run), or in a function of their package that they call.
func findBenchmarks(root string, metrics map[string]bool) ([]benchmark, error) {
	var out []benchmark
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != root {
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
		}
		found, err := packageBenchmarks(path, metrics)
		if err != nil {
			return err
		}
		out = append(out, found...)
		return nil
	})
	return out, err
}

// packageBenchmarks is findBenchmarks for the test files of one directory.
func packageBenchmarks(dir string, metrics map[string]bool) ([]benchmark, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil || len(files) == 0 {
		return nil, err
	}
	fset := token.NewFileSet()
	reports := map[string][]string{} // function → the metrics it reports itself
	calls := map[string][]string{}   // function → the functions it calls by name
	var benches []string
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Recv != nil {
				continue
			}
			name := fn.Name.Name
			if strings.HasPrefix(name, "Benchmark") {
				benches = append(benches, name)
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				switch fun := call.Fun.(type) {
				case *ast.Ident:
					calls[name] = append(calls[name], fun.Name)
				case *ast.SelectorExpr:
					if fun.Sel.Name == "ReportMetric" && len(call.Args) == 2 {
						if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							if unit, err := strconv.Unquote(lit.Value); err == nil && metrics[unit] {
								reports[name] = append(reports[name], unit)
							}
						}
					}
				}
				return true
			})
		}
	}
	var out []benchmark
	pkg := "./" + filepath.ToSlash(dir)
	if dir == "." {
		pkg = "."
	}
	for _, b := range benches {
		ms := slices.Clone(reports[b])
		for _, callee := range calls[b] {
			ms = append(ms, reports[callee]...)
		}
		if len(ms) == 0 {
			continue
		}
		slices.Sort(ms)
		out = append(out, benchmark{pkg: pkg, name: strings.TrimPrefix(b, "Benchmark"), metrics: slices.Compact(ms)})
	}
	return out, nil
}

// results are the metrics of the benchmarks run, by benchmark name (without
// "Benchmark" and the GOMAXPROCS suffix) and unit.
type results map[string]map[string]float64

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// bench runs go test -bench in pkg with args and adds the metrics it prints. Of
// a benchmark run more than once, it keeps the fastest run's metrics: the load
// of a shared machine only ever slows a run down.
func (res results) bench(pkg string, args ...string) error {
	args = append([]string{"test", "-run", "^$", "-benchmem", pkg}, args...)
	cmd := exec.Command("go", args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		metrics := map[string]float64{}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		if old, ok := res[m[1]]; !ok || metrics["ns/op"] < old["ns/op"] {
			res[m[1]] = metrics
		}
	}
	return nil
}

// reporting returns the benchmarks that reported metric, in order.
func (res results) reporting(metric string) []string {
	var names []string
	for _, name := range res.names() {
		if _, ok := res[name][metric]; ok {
			names = append(names, name)
		}
	}
	return names
}

func (res results) names() []string {
	names := make([]string, 0, len(res))
	for name := range res {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// loadBenchmarks runs run --kube's load benchmarks on the simulated cluster,
// adds their metrics (steps/s among them) and returns the rows of their other
// figures.
func (res results) loadBenchmarks() ([]row, error) {
	fmt.Fprintln(os.Stderr, "running the load benchmarks on the simulated cluster…")
	load := results{}
	if err := load.bench("./runtimes/kube", "-bench", "RunAtScale/(fan-out-1000|chain-100$|foreach-10000)", "-benchtime", "1x", "-timeout", "3h"); err != nil {
		return nil, err
	}
	var rows []row
	for _, name := range []string{"fan-out-1000", "chain-100", "foreach-10000"} {
		m := load["RunAtScale/"+name]
		if m == nil {
			return nil, fmt.Errorf("the load benchmark %s reported nothing", name)
		}
		if name == "fan-out-1000" {
			// The goal's row reads steps/s; the others are figures.
			res["RunAtScale/"+name] = map[string]float64{"steps/s": m["steps/s"]}
		} else {
			rows = append(rows, row{"run --kube " + name + ": steps a second, end to end", fmt.Sprintf("%.2f steps/s", m["steps/s"]), "", ""})
		}
		mem := row{"run --kube " + name + ": peak memory held by the Go runtime", fmt.Sprintf("%.0f MiB (heap %.0f MiB)", m["MiB-peak-total"], m["MiB-peak-heap"]), "", ""}
		if name == "fan-out-1000" {
			mem.goal, mem.holds = "< 150 MB", yes(m["MiB-peak-total"]*(1<<20) < 150e6)
		}
		rows = append(rows, row{"run --kube " + name + ": wall", fmt.Sprintf("%.0f s", m["s-wall"]), "", ""}, mem,
			row{"run --kube " + name + ": API requests", fmt.Sprintf("%.0f (%.2f a step)", m["requests"], m["requests/step"]), "", ""})
		if argo, ok := m["argo-s-wall"]; ok {
			rows = append(rows, row{"Argo " + name + ": wall; Manifold/Argo steps a second", fmt.Sprintf("%.0f s for %.0f steps; ×%.2f", argo, m["argo-steps"], m["manifold/argo-steps/s"]), "", ""})
		}
	}
	return rows, nil
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}
