package local_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/harness/proctest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

func init() { programs["killed"] = killedFlow }

// stepScript is a step that proves, in the file $KILL_LOG, how often it ran
// and whether two of it ever ran at once: it takes a lock of its own, which
// every process it starts holds too, writes "start" once it has it (or
// "overlap", and fails, when a process of an earlier run of it holds it), then
// "end" and the time (Unix nanoseconds) when its work is done. $1 is the step (a foreach item adds its index),
// $2 how many seconds its work takes.
const stepScript = `label="$1${MANIFOLD_INDEX:+[$MANIFOLD_INDEX]}"
exec 9>>"$KILL_LOG.$label.lock"
flock -n 9 || { echo "$label overlap" >> "$KILL_LOG"; exit 1; }
echo "$label start" >> "$KILL_LOG"
sleep "$2" & wait
echo "$label end ` + "`date +%s%N`" + `" >> "$KILL_LOG"`

func scriptStep(name, secs string) sdk.StepOption {
	return sdk.Command("sh", "-c", stepScript, "sh", name, secs)
}

// killedFlow is a diamond of shell steps that last a second or more, each
// started in the background of its shell, as a step's own work may be.
var killedFlow = sdk.NewFlow("killed", sdk.Image("registry.example.com/killed:v1")).
	Step("first", scriptStep("first", "2")).
	Step("fan", sdk.After("first"), scriptStep("fan", "2"), sdk.Foreach("a", "b", "c")).
	Step("side", scriptStep("side", "4")).
	Step("join", sdk.After("fan", "side"), scriptStep("join", "2"))

// logLines reads the steps' log: per label, what each run of it wrote
// ("start", "end", "overlap"), and the times of its ends.
func logLines(t *testing.T, path string) (map[string][]string, map[string][]int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string][]string{}, map[string][]int64{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out, ends := map[string][]string{}, map[string][]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			t.Fatalf("a step wrote %q to the log", sc.Text())
		}
		out[f[0]] = append(out[f[0]], f[1])
		if f[1] == "end" && len(f) == 3 {
			at, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				t.Fatalf("a step wrote %q to the log", sc.Text())
			}
			ends[f[0]] = append(ends[f[0]], at)
		}
	}
	return out, ends
}

// runDirProcesses lists the processes whose environment holds run directory
// dir, as every process of its steps does.
func runDirProcesses(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	mark := []byte(plan.EnvRunDir + "=" + dir)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && slices.ContainsFunc(bytes.Split(env, []byte{0}), func(kv []byte) bool { return bytes.Equal(kv, mark) }) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestRunnerKilled kills `run` with SIGKILL at random moments, again and again,
// resuming it each time with --run-id, then lets it finish. Each step writes
// to a log when it starts and ends, under a lock its processes hold: the run
// succeeds; no step ever ran beside an earlier run of itself; none started
// again once the record said it succeeded; the steps' processes die with
// their runner; the record parses and agrees with the log after every kill;
// and nothing of the run is left running.
func TestRunnerKilled(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("steps die with their runner, and a resume finds what they left, on Linux")
	}
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("the steps of this test need flock(1)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	stepLog := filepath.Join(work, "steps.log")
	const id = "killed"
	runs := filepath.Join(work, record.DefaultRoot)
	dir := filepath.Join(runs, id)
	// dead holds the times between which no runner ran: from the end of a
	// killed runner to the start of the next.
	var dead [][2]int64
	start := func() (*exec.Cmd, *bytes.Buffer, chan error) {
		var out bytes.Buffer
		cmd := exec.Command(exe, "run", "--run-id", id, "-j", "4")
		cmd.Args[0] = "killed"
		cmd.Dir, cmd.Stdout, cmd.Stderr = work, &out, &out
		cmd.Env = append(os.Environ(), "KILL_LOG="+stepLog)
		if len(dead) > 0 {
			dead[len(dead)-1][1] = time.Now().UnixNano()
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return cmd, &out, done
	}
	var outputs strings.Builder
	defer func() {
		if t.Failed() {
			t.Logf("the runners' output:\n%s", outputs.String())
		}
	}()

	rounds, rng := proctest.KillSchedule(t)
	succeeded := map[string]int{} // label → its starts in the log when the record first said it succeeded
	kills := 0
	for i := range rounds {
		delay := time.Duration(50+rng.IntN(1450)) * time.Millisecond
		cmd, out, done := start()
		killed := false
		select {
		case err := <-done:
			t.Logf("runner %d ended before its kill after %s: %v", i+1, delay, err)
		case <-time.After(delay):
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
			killed = true
		}
		fmt.Fprintf(&outputs, "--- runner %d (kill after %s: %v) ---\n%s", i+1, delay, killed, out)
		if !killed {
			break
		}
		kills++
		t.Logf("kill %d after %s", kills, delay)
		dead = append(dead, [2]int64{0, 0})

		// The steps die with their runner: none is left running to write to
		// the log (each works for 2 seconds or more).
		reaped := time.Now()
		dead[len(dead)-1][0] = reaped.UnixNano()
		for deadline := reaped.Add(time.Second); ; time.Sleep(20 * time.Millisecond) {
			var leaders []int
			for _, pid := range runDirProcesses(dir) {
				if cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.HasPrefix(cmdline, []byte("sh\x00")) {
					leaders = append(leaders, pid)
				}
			}
			if len(leaders) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after kill %d, steps still run without their runner: %v", kills, leaders)
			}
		}

		lines, _ := logLines(t, stepLog)
		if _, err := os.Stat(filepath.Join(dir, "run.json")); err != nil {
			continue // killed before it recorded the run
		}
		rec, tasks, err := record.Read(runs, id)
		if err != nil {
			t.Fatalf("after kill %d the record is corrupt: %v", kills, err)
		}
		if rec.State != record.Abandoned && rec.State != record.Succeeded {
			t.Errorf("after kill %d run.json says %s; want abandoned (or succeeded)", kills, rec.State)
		}
		for _, task := range tasks {
			l := task.Label()
			switch task.State {
			case record.Pending, record.Running:
			case record.Succeeded:
				if !slices.Contains(lines[l], "end") {
					t.Errorf("after kill %d, %s is recorded succeeded, but it never ended", kills, l)
				}
				if task.Start.IsZero() || task.End.Before(task.Start) {
					t.Errorf("after kill %d, %s is recorded succeeded with start %v and end %v", kills, l, task.Start, task.End)
				}
				if _, ok := succeeded[l]; !ok {
					succeeded[l] = count(lines[l], "start")
				}
			default:
				t.Errorf("after kill %d, %s is recorded %s (%s); nothing in this run fails", kills, l, task.State, task.Error)
			}
		}
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(d.Name(), ".tmp") {
				t.Errorf("after kill %d a temporary file is left in the record: %s", kills, path)
			}
			return nil
		})
		if t.Failed() {
			t.FailNow()
		}
	}

	_, out, done := start()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the last runner did not end in 2m")
	}
	fmt.Fprintf(&outputs, "--- last runner ---\n%s", out)
	if err != nil {
		t.Fatalf("the last runner: %v\n%s", err, out)
	}
	rec, tasks, err := record.Read(runs, id)
	if err != nil {
		t.Fatalf("the record is corrupt: %v", err)
	}
	if rec.State != record.Succeeded || len(tasks) != 6 {
		t.Errorf("run.json: %s with %d tasks; want succeeded with 6", rec.State, len(tasks))
	}
	lines, ends := logLines(t, stepLog)
	again := 0
	for _, task := range tasks {
		l := task.Label()
		if task.State != record.Succeeded {
			t.Errorf("%s: %s; want succeeded", l, task.State)
		}
		if slices.Contains(lines[l], "overlap") {
			t.Errorf("%s ran beside an earlier run of itself: %v", l, lines[l])
		}
		if n, ok := succeeded[l]; ok && count(lines[l], "start") > n {
			t.Errorf("%s started again after the record said it succeeded: %v", l, lines[l])
		}
		for _, at := range ends[l] {
			for _, d := range dead {
				if at > d[0] && at < d[1] {
					t.Errorf("%s ended at %d, while no runner ran (a kill ended at %d, the next runner started at %d)", l, at, d[0], d[1])
				}
			}
		}
		if ends := count(lines[l], "end"); ends != 1 {
			// Its end came between the step's exit and its record: the runner
			// died without knowing it succeeded, and ran it again.
			again++
			t.Logf("%s ended %d times: %v", l, ends, lines[l])
		}
	}
	if left := runDirProcesses(dir); len(left) > 0 {
		t.Errorf("processes of the run still run: %v", left)
	}
	t.Logf("survived %d kills; steps started again after their recorded success: 0; steps whose unrecorded success was run again: %d", kills, again)
}

func count(lines []string, what string) int {
	n := 0
	for _, l := range lines {
		if l == what {
			n++
		}
	}
	return n
}
