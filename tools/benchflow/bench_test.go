package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCompileAll runs `benchflow compile --target all -o DIR` as a whole
// process, as a user runs it, for a generated chain of 10,000 steps (the goal's
// flow), of 1,000 and of 10, in turn each iteration, into a new directory each
// time. It reports, for 10,000 steps, the median wall time (s/compile) and the
// most resident memory any run held (peak-MB, the kernel's maxrss); the cost of
// a step at 1,000 and 10,000 steps (us/step-1k, us/step-10k: the median wall
// time less the 10-step compile's, which is the program's start and what does
// not grow with the steps, divided by the steps added); the bytes the
// 10,000-step compile writes (MB-written) and how fast, against its median
// wall time (MB/s-written); and how fast dd writes as many bytes to the same
// file system in the same iteration, without syncing them, as compile does
// not (MB/s-dd), and synced (MB/s-dd-sync).
func BenchmarkCompileAll(b *testing.B) {
	dir := b.TempDir()
	program := filepath.Join(dir, "benchflow")
	if out, err := exec.Command("go", "build", "-o", program, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	walls := map[int][]time.Duration{}
	var peak int64
	var written int64
	var dd, ddSync []float64
	run := 0
	compile := func(steps int) (time.Duration, int64) {
		run++
		out := filepath.Join(dir, "out"+strconv.Itoa(run))
		defer os.RemoveAll(out)
		cmd := exec.Command(program, "compile", "--target", "all", "-o", out)
		cmd.Env = append(os.Environ(), "BENCHFLOW=chain:"+strconv.Itoa(steps))
		start := time.Now()
		output, err := cmd.CombinedOutput()
		wall := time.Since(start)
		if err != nil {
			b.Fatalf("compile of %d steps: %v\n%s", steps, err, output)
		}
		if steps == 10000 {
			peak = max(peak, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss*1024)
			written = 0
			err := filepath.WalkDir(out, func(_ string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				info, err := d.Info()
				written += info.Size()
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		return wall, written
	}
	for b.Loop() {
		for _, n := range []int{10000, 1000, 10} {
			wall, _ := compile(n)
			walls[n] = append(walls[n], wall)
		}
		dd = append(dd, ddRate(b, dir, written, false))
		ddSync = append(ddSync, ddRate(b, dir, written, true))
	}
	start := median(walls[10])
	b.ReportMetric(median(walls[10000]).Seconds(), "s/compile")
	b.ReportMetric(float64(peak)/1e6, "peak-MB")
	b.ReportMetric(float64((median(walls[1000])-start).Microseconds())/990, "us/step-1k")
	b.ReportMetric(float64((median(walls[10000])-start).Microseconds())/9990, "us/step-10k")
	b.ReportMetric(float64(written)/1e6, "MB-written")
	b.ReportMetric(float64(written)/1e6/median(walls[10000]).Seconds(), "MB/s-written")
	slices.Sort(dd)
	slices.Sort(ddSync)
	b.ReportMetric(dd[len(dd)/2], "MB/s-dd")
	b.ReportMetric(ddSync[len(ddSync)/2], "MB/s-dd-sync")
}

// ddRate writes size bytes of zeros with dd to a file in dir, in blocks of 64
// KiB (compile's buffer), synced to the disk before dd ends when sync is set,
// and returns the rate in MB a second of dd as a whole process.
func ddRate(b *testing.B, dir string, size int64, sync bool) float64 {
	b.Helper()
	path := filepath.Join(dir, "dd")
	defer os.Remove(path)
	args := []string{"if=/dev/zero", "of=" + path, "bs=64K", fmt.Sprintf("count=%d", (size+65535)/65536)}
	if sync {
		args = append(args, "conv=fsync")
	}
	start := time.Now()
	if out, err := exec.Command("dd", args...).CombinedOutput(); err != nil {
		b.Fatalf("dd: %v\n%s", err, out)
	}
	return float64(size) / 1e6 / time.Since(start).Seconds()
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
