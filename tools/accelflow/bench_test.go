package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/image"
)

// BenchmarkCompile is `accelflow compile --target all -o DIR` inside this
// process: the compile and the four targets' files written, without the
// program's start. It reports ms/compile.
func BenchmarkCompile(b *testing.B) {
	dir := b.TempDir()
	b.Chdir(dir)
	if err := os.WriteFile("manifold.toml", []byte("argo_max_bytes = -1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out := filepath.Join(dir, "out"+strconv.Itoa(i))
		i++
		if code := cli.Run(context.Background(), flow, []string{"accelflow", "compile", "--target", "all", "-o", out}, &stdout, &stderr); code != 0 {
			b.Fatalf("compile: exit %d\n%s", code, stderr.Bytes())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/compile")
}

// programs are this flow program built the two ways it is built, and a Go
// hello world to start beside them.
type programs struct {
	// workstation is `go build` of the flow, as a user builds it; image is the
	// program `image build` puts in an image (image.GoBuild: -trimpath, -s -w,
	// the image's build tags, no cgo); hello is `go build` of a main that prints
	// a line.
	workstation, image, hello string
}

var (
	built    programs
	buildErr error
	once     sync.Once
	// buildDir holds the programs; removed when the tests and benchmarks end.
	buildDir string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// build builds the programs once for every benchmark of the process.
func build(b *testing.B) programs {
	b.Helper()
	once.Do(func() { built, buildErr = buildPrograms() })
	if buildErr != nil {
		b.Fatal(buildErr)
	}
	return built
}

func buildPrograms() (programs, error) {
	dir, err := os.MkdirTemp("", "accelflow-bench-")
	if err != nil {
		return programs{}, err
	}
	buildDir = dir // the benchmarks of the process share it; TestMain removes it
	p := programs{workstation: filepath.Join(dir, "accelflow"), hello: filepath.Join(dir, "hello", "hello")}
	if out, err := exec.Command("go", "build", "-o", p.workstation, ".").CombinedOutput(); err != nil {
		return p, fmt.Errorf("go build: %v\n%s", err, out)
	}
	gb := &image.GoBuild{Package: "."}
	if p.image, err = gb.Compile(context.Background(), v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, dir); err != nil {
		return p, err
	}
	hello := filepath.Join(dir, "hello")
	if err := os.MkdirAll(hello, 0o755); err != nil {
		return p, err
	}
	files := map[string]string{
		"go.mod":  "module hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello, world\") }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(hello, name), []byte(text), 0o644); err != nil {
			return p, err
		}
	}
	cmd := exec.Command("go", "build", "-o", p.hello, ".")
	cmd.Dir, cmd.Env = hello, append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return p, fmt.Errorf("go build of hello world: %v\n%s", err, out)
	}
	return p, nil
}

// BenchmarkStart starts the flow program for --help, validate, compile
// (--target all -o DIR) and step (a step that does nothing), as a whole
// process, built as a workstation builds it and as `image build` builds it,
// each run paired with a run of a Go hello world. It reports the program's
// median wall time (ms/start; ms/compile for compile), the hello world's
// (hello-ms), their ratio (start-ratio: the median of the pairs' ratios, which
// holds when the machine's speed drifts), the program's median CPU time (user
// and system: cpu-ms) and the hello world's (hello-cpu-ms), which a loaded
// machine stretches less than wall time, its median minor page faults
// (page-faults) and its size (binary-MB, 10^6 bytes).
func BenchmarkStart(b *testing.B) {
	p := build(b)
	work := b.TempDir()
	if err := os.WriteFile(filepath.Join(work, "manifold.toml"), []byte("argo_max_bytes = -1\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	commands := []struct {
		name string
		args func(i int) []string
	}{
		{"help", func(int) []string { return []string{"--help"} }},
		{"validate", func(int) []string { return []string{"validate"} }},
		{"compile", func(i int) []string {
			return []string{"compile", "--target", "all", "-o", filepath.Join(work, "out"+strconv.Itoa(i))}
		}},
		{"step", func(int) []string { return []string{"step", "end"} }},
	}
	for _, variant := range []struct{ name, path string }{{"workstation", p.workstation}, {"image", p.image}} {
		info, err := os.Stat(variant.path)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range commands {
			b.Run(c.name+"/"+variant.name, func(b *testing.B) {
				var prog, hello, ratios, cpu, helloCPU, faults []float64
				i := 0
				for b.Loop() {
					h := run(b, work, p.hello)
					t := run(b, work, variant.path, c.args(i)...)
					i++
					prog, hello, ratios = append(prog, t.wall), append(hello, h.wall), append(ratios, t.wall/h.wall)
					cpu, helloCPU, faults = append(cpu, t.cpu), append(helloCPU, h.cpu), append(faults, t.faults)
				}
				unit := "ms/start"
				if c.name == "compile" {
					unit = "ms/compile"
				}
				b.ReportMetric(median(prog), unit)
				b.ReportMetric(median(hello), "hello-ms")
				b.ReportMetric(median(ratios), "start-ratio")
				b.ReportMetric(median(cpu), "cpu-ms")
				b.ReportMetric(median(helloCPU), "hello-cpu-ms")
				b.ReportMetric(median(faults), "page-faults")
				b.ReportMetric(float64(info.Size())/1e6, "binary-MB")
			})
		}
	}
}

// started is what a run of a program took: its wall time and CPU time (user
// and system) in milliseconds, and its minor page faults. On a loaded machine
// the wall time stretches with the other work; the CPU time and the faults
// much less.
type started struct{ wall, cpu, faults float64 }

// run runs a program in dir and returns what it took.
func run(b *testing.B, dir, path string, args ...string) started {
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "MANIFOLD_RUN_DIR="+filepath.Join(dir, "runs"), "MANIFOLD_RUN_ID=bench")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s", filepath.Base(path), args, err, out.Bytes())
	}
	wall := time.Since(start)
	s := started{wall: float64(wall.Microseconds()) / 1000}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
		s.faults = float64(ru.Minflt)
	}
	return s
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}
