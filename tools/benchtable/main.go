// Command benchtable measures Manifold's compile and local runner against their
// goals and prints one table (make bench). It builds the 12-step benchmark flow
// accelflow and the generated flow program benchflow, times whole compiles
// (`<flow> compile --target all -o DIR`: median wall time, peak resident memory
// from rusage), and runs the Go benchmarks of harness/benchflow and
// runtimes/local for the per-step figures. With -load (make bench-load) it
// also runs run --kube's load benchmarks on the simulated cluster
// (runtimes/kube BenchmarkRunAtScale: a 1,000-step fan-out, a 100-step chain
// and 10,000 foreach items, the first two also under Argo's controller), which
// take more than an hour and the cluster's programs (make sim-tools).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// load is -load: run the load benchmarks of run --kube too.
var load = flag.Bool("load", false, "also run run --kube's load benchmarks on the simulated cluster (more than an hour)")

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// row is one figure against its goal.
type row struct {
	figure, measured, goal string
	holds                  bool
}

func run() error {
	tmp, err := os.MkdirTemp("", "manifold-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "bin") + string(filepath.Separator)
	fmt.Fprintln(os.Stderr, "building the flows…")
	if out, err := exec.Command("go", "build", "-o", bin, "./tools/accelflow", "./tools/benchflow").CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	// The generated flows' WorkflowTemplates pass the default argo_max_bytes
	// from about 1,000 steps; the benchmarks measure them whole.
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "manifold.toml"), []byte("argo_max_bytes = -1\n"), 0o644); err != nil {
		return err
	}

	var rows []row
	fmt.Fprintln(os.Stderr, "timing whole compiles…")
	wall, rss, err := measure(work, bin+"accelflow", nil, 31)
	if err != nil {
		return err
	}
	rows = append(rows, row{"12-step accelflow → all four, whole process, median", ms(wall), "≤ 30 ms", wall <= 30*time.Millisecond},
		row{"12-step accelflow → all four, peak RSS", mib(rss), "", true})
	for _, shape := range []string{"chain", "fanout"} {
		wall, rss, err := measure(work, bin+"benchflow", []string{"BENCHFLOW=" + shape + ":10000"}, 5)
		if err != nil {
			return err
		}
		rows = append(rows, row{"10,000-step " + shape + " → all four, whole process, median", ms(wall), "≤ 2 s", wall <= 2*time.Second},
			row{"10,000-step " + shape + " → all four, peak RSS", mib(rss), "≤ 500 MB", rss <= 500e6})
	}

	fmt.Fprintln(os.Stderr, "running the benchmarks…")
	// The per-step benchmarks run three times over, a minute or so apart, so that
	// each size has its chance at a quiet moment of the machine.
	perStep := []string{"./harness/benchflow", "-bench", ".", "-benchtime", "3x"}
	res, err := benchmarks(perStep, perStep, perStep,
		[]string{"./runtimes/local", "-bench", "Overhead|Run1000", "-benchtime", "1x"},
		[]string{"./tools/accelflow", "-bench", ".", "-benchtime", "21x"},
	)
	if err != nil {
		return err
	}
	single := res["ArgoSingleNode"]["argo.yaml-bytes/step"]
	rows = append(rows, row{"Argo bytes per single-node step (1,000-step chain)", fmt.Sprintf("%.0f B", single), "≤ 1,536 B", single <= 1536})
	for _, shape := range []string{"chain", "fanout"} {
		mixed := res["Compile/"+shape+"/1000/argo"]["argo.yaml-bytes/step"]
		rows = append(rows, row{"500-step " + shape + " WorkflowTemplate, 10% multi-node (500 × bytes/step at 1,000)", fmt.Sprintf("%.0f KB", 500*mixed/1000), "< 1,048,576 B", 500*mixed < 1<<20})
	}
	for _, shape := range []string{"chain", "fanout"} {
		for _, target := range []string{"job", "jobset", "argo", "airflow", "all"} {
			at := func(n int) map[string]float64 { return res[fmt.Sprintf("Compile/%s/%d/%s", shape, n, target)] }
			k, tk := at(1000), at(10000)
			growth := tk["ns/step"] / k["ns/step"]
			rows = append(rows, row{fmt.Sprintf("%s → %s: ns/step at 1,000 → 10,000", shape, target),
				fmt.Sprintf("%.0f → %.0f µs (×%.2f); allocs/step %.0f → %.0f; peak heap %.0f MB", k["ns/step"]/1000, tk["ns/step"]/1000, growth, k["allocs/step"], tk["allocs/step"], tk["peak-heap-MB"]),
				"does not grow (×≤1.25)", growth <= 1.25})
		}
	}
	for _, target := range []string{"job.yaml", "jobset.yaml", "argo.yaml", "py", "kpo.json"} {
		b := res["Compile/chain/10000/all"][target+"-bytes/step"]
		rows = append(rows, row{"output bytes/step at 10,000 (chain): " + target, fmt.Sprintf("%.0f B", b), "", true})
	}
	for _, name := range []string{"Overhead", "Run1000"} {
		o := res[name]["overhead-ms/step"]
		rows = append(rows, row{"local runner overhead per step (" + name + ")", fmt.Sprintf("%.2f ms (%.2f ms/step, %.2f ms/process)", o, res[name]["ms/step"], res[name]["ms/process"]), "< 5 ms", o < 5})
	}

	rows = append(rows, startRows(res)...)

	if *load {
		more, err := loadRows()
		if err != nil {
			return err
		}
		rows = append(rows, more...)
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "figure\tmeasured\tgoal\tholds")
	failed := 0
	for _, r := range rows {
		mark := "yes"
		if r.goal == "" {
			mark = ""
		} else if !r.holds {
			mark, failed = "NO", failed+1
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", r.figure, r.measured, r.goal, mark)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if load, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("load average during the run: %s", load)
	}
	if failed > 0 {
		return fmt.Errorf("%d figures miss their goals", failed)
	}
	return nil
}

// measure runs `prog compile --target all -o DIR` n times in dir and returns the
// median wall time and the largest peak resident memory.
func measure(dir, prog string, env []string, n int) (time.Duration, int64, error) {
	var walls []time.Duration
	var peak int64
	for i := range n {
		out := filepath.Join(dir, "out"+strconv.Itoa(i))
		cmd := exec.Command(prog, "compile", "--target", "all", "-o", out)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("%s compile: %v\n%s", filepath.Base(prog), err, stderr.Bytes())
		}
		walls = append(walls, time.Since(start))
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			peak = max(peak, ru.Maxrss*1024) // kilobytes on Linux
		}
		if err := os.RemoveAll(out); err != nil {
			return 0, 0, err
		}
	}
	slices.Sort(walls)
	return walls[len(walls)/2], peak, nil
}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(-\d+)?\s+\d+\s+(.*)$`)

// benchmarks runs each package's benchmarks and returns their metrics by
// benchmark name (without "Benchmark" and the GOMAXPROCS suffix) and unit. Of a
// benchmark run more than once, it keeps the fastest run's metrics: the load of
// a shared machine only ever slows a run down.
func benchmarks(runs ...[]string) (map[string]map[string]float64, error) {
	res := map[string]map[string]float64{}
	for _, r := range runs {
		args := append([]string{"test", "-run", "^$", "-benchmem"}, r...)
		cmd := exec.Command("go", args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out.Bytes())
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
				v, err := strconv.ParseFloat(f[i], 64)
				if err == nil {
					metrics[f[i+1]] = v
				}
			}
			if old, ok := res[m[1]]; !ok || metrics["ns/op"] < old["ns/op"] {
				res[m[1]] = metrics
			}
		}
	}
	return res, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func mib(b int64) string { return fmt.Sprintf("%.0f MB", float64(b)/1e6) }

// startRows are the flow program's start against a Go hello world and its
// size (tools/accelflow BenchmarkStart), built as a workstation builds it and
// as image build builds it, and the 12-step compile inside the process.
func startRows(res map[string]map[string]float64) []row {
	var rows []row
	for _, variant := range []string{"workstation", "image"} {
		for _, cmd := range []string{"help", "validate", "compile", "step"} {
			m := res["Start/"+cmd+"/"+variant]
			t := m["ms/start"]
			if cmd == "compile" {
				t = m["ms/compile"]
			}
			rows = append(rows, row{fmt.Sprintf("flow program (%s build) %s: start against a Go hello world", variant, cmd),
				fmt.Sprintf("×%.1f (%.1f ms; hello %.1f ms)", m["start-ratio"], t, m["hello-ms"]), "≤ ×3", m["start-ratio"] <= 3})
		}
		size := res["Start/help/"+variant]["binary-MB"]
		rows = append(rows, row{fmt.Sprintf("flow program (%s build) size", variant), fmt.Sprintf("%.1f MB", size), "≤ 40 MB", size <= 40})
	}
	c := res["Compile"]["ms/compile"]
	rows = append(rows, row{"12-step accelflow → all four, inside the process (no start)", fmt.Sprintf("%.2f ms", c), "", true})
	return rows
}

// loadRows runs run --kube's load benchmarks on the simulated cluster and
// returns their figures: the performance goal is a 1,000-step fan-out at 20
// steps a second or more, end to end, the runner under 150 MB.
func loadRows() ([]row, error) {
	fmt.Fprintln(os.Stderr, "running the load benchmarks on the simulated cluster…")
	res, err := benchmarks([]string{"./runtimes/kube", "-bench", "RunAtScale/(fan-out-1000|chain-100$|foreach-10000)", "-benchtime", "1x", "-timeout", "3h"})
	if err != nil {
		return nil, err
	}
	var rows []row
	for _, name := range []string{"fan-out-1000", "chain-100", "foreach-10000"} {
		m := res["RunAtScale/"+name]
		if m == nil {
			return nil, fmt.Errorf("the load benchmark %s reported nothing", name)
		}
		rate := fmt.Sprintf("%.2f steps/s (%.0f s wall)", m["steps/s"], m["s-wall"])
		r := row{"run --kube " + name + ": steps a second, end to end", rate, "", true}
		mem := row{"run --kube " + name + ": peak memory held by the Go runtime", fmt.Sprintf("%.0f MiB (heap %.0f MiB)", m["MiB-peak-total"], m["MiB-peak-heap"]), "", true}
		if name == "fan-out-1000" {
			r.goal, r.holds = "≥ 20 steps/s", m["steps/s"] >= 20
			mem.goal, mem.holds = "< 150 MB", m["MiB-peak-total"]*(1<<20) < 150e6
		}
		rows = append(rows, r, mem, row{"run --kube " + name + ": API requests", fmt.Sprintf("%.0f (%.2f a step)", m["requests"], m["requests/step"]), "", true})
		if argo, ok := m["argo-s-wall"]; ok {
			rows = append(rows, row{"Argo " + name + ": wall; Manifold/Argo steps a second", fmt.Sprintf("%.0f s for %.0f steps; ×%.2f", argo, m["argo-steps"], m["manifold/argo-steps/s"]), "", true})
		}
	}
	return rows, nil
}
