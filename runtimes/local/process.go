package local

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/internal/deathsig"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// outcome is how one attempt ended.
type outcome struct {
	// exitCode is the process's exit status, -1 if a signal ended it, nil if it
	// never started.
	exitCode *int
	// err is nil on success; dag.ErrTimedOut (wrapped) when the step ran past
	// its Timeout.
	err error
	// lastErr is the last line the attempt wrote to stderr, for the error message.
	lastErr string
}

// failure says why a failed attempt failed: its error and the last line it
// wrote to stderr.
func (o outcome) failure() error {
	if o.lastErr == "" {
		return o.err
	}
	return fmt.Errorf("%w: %s", o.err, clip(o.lastErr, 300))
}

// Attempt runs attempt n of unit u of run r as Run runs it: a process of this
// machine with the environment Command gives it, its output in the unit's
// stdout.log and stderr.log and on r.Disp (which must be set), stopped at its
// step's Timeout or when ctx ends, its process group ended with it. It returns
// the process's exit code (nil when none started, -1 when a signal ended it)
// and, when the attempt failed, why, with the last line it wrote to stderr. Of
// o, Program and Arg0 run a Run step, and KillGrace applies (DefaultKillGrace
// when 0). A runner that decides itself when each unit runs (a test's) runs a
// unit's attempt through it.
func Attempt(ctx context.Context, r *dag.Run, u *dag.Unit, n int, o Options) (*int, error) {
	if o.KillGrace <= 0 {
		o.KillGrace = DefaultKillGrace
	}
	run := &runner{Run: r, o: o}
	t := newTask(r.Dir, u)
	if err := os.MkdirAll(t.stateDir, 0o755); err != nil {
		return nil, err
	}
	out := run.attempt(ctx, t, n)
	if out.err == nil {
		return out.exitCode, nil
	}
	return out.exitCode, out.failure()
}

// command returns the argv and environment of task t: the step's pod environment
// (stepCommand) over this process's environment minus the variables Manifold
// sets. secrets are the values the runner must keep out of what it writes:
// those read from this environment for the step's Secret variables
// (sdk.SecretEnv), and plain values and arguments that look like credentials.
func (r *runner) command(t *task) (argv, env, secrets []string) {
	argv, names, vars, secrets := stepCommand(r.Flow, r.Dir, t.Unit, r.Count(t.Unit))
	// A traced run gives the step its attempt's trace context, in place of any
	// this process inherited.
	tp := r.TraceParent(t.Unit)
	if tp != "" {
		vars[plan.EnvTraceParent] = tp
		names = append(names, plan.EnvTraceParent)
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if managed(name) || tp != "" && (name == plan.EnvTraceParent || name == envTraceState) {
			continue
		}
		env = append(env, kv)
	}
	for _, n := range names {
		env = append(env, n+"="+vars[n])
	}
	return argv, env, secrets
}

// Command returns the argv that unit u of flow f, in the run kept in dir, runs
// on this machine, and the variables it gets over this process's environment:
// its pod's (emit.Env: MANIFOLD_PARAM_*, MANIFOLD_ITEM and MANIFOLD_INDEX, the
// step's own variables, a Secret's from this environment when it has it), with
// $(NAME) references expanded as the kubelet expands them, plus
// MANIFOLD_RUN_DIR and MANIFOLD_ARTIFACTS, and, for a step that publishes a
// value a later step fans out over or branches on, MANIFOLD_VALUES: the same
// directory as MANIFOLD_ARTIFACTS, so that the file a Command step writes there
// is both its artifact and its published value. A runner that does not start the
// process (a test's stub) shows it what it would have run.
func Command(f *plan.Flow, dir string, u *dag.Unit, count int) (argv []string, vars map[string]string) {
	argv, _, vars, _ = stepCommand(f, dir, u, count)
	return argv, vars
}

// stepCommand returns Command's argv and variables, the variables' names in
// order, and the values among them that are secrets (see command).
func stepCommand(f *plan.Flow, dir string, u *dag.Unit, count int) (argv, names []string, vars map[string]string, secrets []string) {
	vars = map[string]string{
		plan.EnvRunDir:    dir,
		plan.EnvArtifacts: sdk.ArtifactDir(dir, u.Step.Name, u.Index),
	}
	names = []string{plan.EnvRunDir, plan.EnvArtifacts}
	if len(f.Published(u.Step.Name)) > 0 {
		// The values it publishes are its artifacts: one file serves both.
		vars[plan.EnvValues] = vars[plan.EnvArtifacts]
		names = append(names, plan.EnvValues)
	}
	var item *emit.Item
	if u.Index >= 0 {
		item = &emit.Item{Value: u.Item, Index: strconv.Itoa(u.Index)}
		if u.Step.ForeachOf != nil {
			item.Count = strconv.Itoa(count)
		}
	}
	// A multi-node step runs once here, as a single node: no rendezvous; and
	// without EFA, so without EFA wiring, whose FI_PROVIDER=efa would make
	// libfabric look for a device this machine lacks. Artifacts stay in the run
	// directory, whatever store the flow has on a cluster.
	single := *u.Step
	single.Nodes = 1
	single.EFAWiring = nil
	flow := *f
	flow.Artifacts = nil
	for _, e := range emit.Env(&flow, &single, emit.PodOptions{Item: item}) {
		if e.ValueFrom != nil {
			// A Secret's value: what this environment has under that name, if any.
			if v, ok := os.LookupEnv(e.Name); ok {
				vars[e.Name] = v
				names = append(names, e.Name)
				if e.ValueFrom.SecretKeyRef != nil {
					secrets = append(secrets, v)
				}
			}
			continue
		}
		if _, seen := vars[e.Name]; !seen {
			names = append(names, e.Name)
		}
		vars[e.Name] = expand(e.Value, vars)
		if _, ok := credential.Detect(e.Name, vars[e.Name]); ok {
			secrets = append(secrets, vars[e.Name])
		}
	}
	for _, a := range u.Step.Command {
		argv = append(argv, expand(a, vars))
	}
	for i := range argv {
		if _, ok := credential.InArgs(argv, i); ok {
			secrets = append(secrets, argv[i])
		}
	}
	return argv, names, vars, secrets
}

// envTraceState goes with TRACEPARENT (W3C trace context); an inherited one
// does not reach a step given a TRACEPARENT of its run's trace.
const envTraceState = "TRACESTATE"

// managed reports whether name is a variable the runner sets for a step; a value
// inherited from the runner's own environment must not reach the step.
func managed(name string) bool {
	switch name {
	case plan.EnvItem, plan.EnvIndex, plan.EnvCount, plan.EnvRunDir, plan.EnvArtifacts, plan.EnvValues,
		plan.EnvArtifactStore, plan.EnvRunID, plan.EnvS3Endpoint:
		return true
	}
	return strings.HasPrefix(name, plan.EnvParamPrefix)
}

// attempt runs task t once. The process leads a process group of its own, and
// the whole group is killed when the attempt ends, whichever way: a step's
// processes never outlive it, as in a container. A timeout or the run's
// interruption sends SIGTERM to the group, then SIGKILL after the grace period.
func (r *runner) attempt(ctx context.Context, t *task, n int) outcome {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if t.Step.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, t.Step.Timeout, dag.TimedOut(t.Step.Timeout))
		defer stop()
	}

	argv, env, secrets := r.command(t)
	red := newRedactor(secrets)
	cmd, err := r.stepCmd(t, argv, env)
	if err != nil {
		return outcome{err: err}
	}
	if err := os.MkdirAll(t.artifacts, 0o755); err != nil {
		return outcome{err: err}
	}
	started := time.Now()
	outFile := &logFile{path: filepath.Join(t.stateDir, record.StdoutLog), attempt: n, start: started}
	errFile := &logFile{path: filepath.Join(t.stateDir, record.StderrLog), attempt: n, start: started}
	defer outFile.close()
	defer errFile.close()
	// The logs, the lines shown and the error recorded hold no secret value.
	outLog, errLog := red.writer(outFile), red.writer(errFile)
	outR, outW, errR, errW, err := outputPipes()
	if err != nil {
		return outcome{err: err}
	}
	defer outR.Close()
	defer errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	err = deathsig.Start(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		if cannotStart(err) {
			return outcome{err: &programError{step: t.Step.Name, program: cmd.Args[0], err: red.err(err)}}
		}
		return outcome{err: red.err(err)}
	}
	r.Running(t.Unit, time.Now())

	var copying sync.WaitGroup
	stdout := &lines{emit: func(line string) { r.Disp.Output(t.Label, false, red.string(line)) }}
	stderr := &lines{emit: func(line string) { r.Disp.Output(t.Label, true, red.string(line)) }}
	copying.Go(func() { pump(outR, outLog, stdout) })
	copying.Go(func() { pump(errR, errLog, stderr) })

	err, stopped := r.wait(ctx, cmd)
	// Whatever the step left running in its group goes with it.
	signalGroup(cmd.Process.Pid, true)
	r.drain(&copying, outR, errR)
	stdout.flush()
	stderr.flush()
	_ = outLog.Flush()
	_ = errLog.Flush()

	code := cmd.ProcessState.ExitCode()
	o := outcome{exitCode: &code, lastErr: red.string(stderr.last)}
	switch {
	case stopped != nil:
		o.err = stopped
	case err != nil:
		o.err = red.err(err)
	}
	// A write the step did not finish leaves a temporary file, never an artifact.
	if _, err := atomicfile.RemoveTemps(t.artifacts); err != nil && o.err == nil {
		o.err = err
	}
	return o
}

// stepCmd returns the process that runs task t's argv with environment env, in
// a process group of its own. A Command step's program that this machine lacks
// is an error.
func (r *runner) stepCmd(t *task, argv, env []string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if t.Step.Body == plan.BodyRun {
		// The flow program runs the step, through the same `step NAME` contract
		// its container uses.
		cmd = exec.Command(r.o.Program, argv[1:]...)
		cmd.Args[0] = r.o.Arg0
	} else {
		// The program is found in the PATH the step gets, as a container's
		// is; one this machine lacks fails the step at once.
		file, err := findProgram(argv[0], envPath(env))
		if err != nil {
			return nil, &programError{step: t.Step.Name, program: argv[0], err: err}
		}
		cmd = exec.Command(file, argv[1:]...)
		cmd.Args[0] = argv[0]
	}
	cmd.Env = env
	newGroup(cmd)
	return cmd, nil
}

// outputPipes returns a pipe each for a process's standard output and standard
// error: the ends the runner reads and those the process writes.
func outputPipes() (outR, outW, errR, errW *os.File, err error) {
	outR, outW, err = os.Pipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	errR, errW, err = os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, nil, nil, err
	}
	return outR, outW, errR, errW, nil
}

// wait waits for the started process of cmd to exit and returns what Wait
// returned. When ctx ends first, it sends SIGTERM to the process group, then
// SIGKILL after the grace period, and stopped is the cause ctx ended with.
func (r *runner) wait(ctx context.Context, cmd *exec.Cmd) (err, stopped error) {
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	select {
	case err = <-waited:
	case <-ctx.Done():
		stopped = context.Cause(ctx)
		signalGroup(pgid, false)
		grace := time.NewTimer(r.o.KillGrace)
		select {
		case err = <-waited:
		case <-grace.C:
			signalGroup(pgid, true)
			err = <-waited
		}
		grace.Stop()
	}
	return err, stopped
}

// drain waits for the output of an ended attempt. A process that left the step's
// process group may still hold the pipes open; after a while the runner stops
// reading rather than wait for it.
func (r *runner) drain(copying *sync.WaitGroup, pipes ...*os.File) {
	done := make(chan struct{})
	go func() {
		copying.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(r.o.KillGrace):
		for _, p := range pipes {
			p.Close()
		}
		<-done
	}
}

// pump copies a step's output into its log and the line splitter.
func pump(src io.Reader, log io.Writer, l *lines) {
	buf := make([]byte, 8<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			_, _ = log.Write(buf[:n])
			l.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// lines splits output into lines for the display and keeps the last one.
type lines struct {
	emit    func(string)
	partial []byte
	// cont is whether part of the line being read was passed on.
	cont bool
	last string
}

func (l *lines) write(p []byte) {
	for len(p) > 0 {
		i := indexNewline(p)
		if i < 0 {
			// A line is kept up to display.MaxLine, and passed on in pieces
			// past it.
			l.partial = append(l.partial, p...)
			for len(l.partial) >= display.MaxLine {
				k := display.RuneCut(l.partial[:display.MaxLine])
				if k == 0 {
					k = display.MaxLine
				}
				l.piece(l.partial[:k])
				l.partial = l.partial[:copy(l.partial, l.partial[k:])]
				l.cont = true
			}
			return
		}
		l.partial = append(l.partial, p[:i]...)
		l.flush()
		p = p[i+1:]
	}
}

func (l *lines) flush() {
	if len(l.partial) > 0 {
		l.piece(bytes.TrimSuffix(l.partial, []byte("\r")))
	}
	l.partial, l.cont = l.partial[:0], false
}

// piece passes on b, the rest of the line being read (display.Continues
// before it when part of the line was passed on).
func (l *lines) piece(b []byte) {
	line := string(b)
	if strings.TrimSpace(line) != "" {
		l.last = line
	}
	if l.cont {
		line = display.Continues + line
	}
	l.emit(line)
}

func indexNewline(p []byte) int {
	for i, c := range p {
		if c == '\n' {
			return i
		}
	}
	return -1
}

// logFile is a task's stdout.log or stderr.log, appended to by each attempt. It
// is opened at the first write, so a step that prints nothing costs no file.
type logFile struct {
	path    string
	attempt int
	start   time.Time
	f       *os.File
	err     error
}

func (l *logFile) Write(p []byte) (int, error) {
	if l.f == nil && l.err == nil {
		l.f, l.err = os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		// A retry's output, or output after an earlier runner's, starts with a
		// line saying which attempt wrote it (record.SplitAttempts).
		if info, err := os.Stat(l.path); l.err == nil && err == nil && (l.attempt > 1 || info.Size() > 0) {
			_, _ = io.WriteString(l.f, record.AttemptMarker(l.attempt, l.start))
		}
	}
	if l.err != nil {
		return 0, l.err
	}
	return l.f.Write(p)
}

func (l *logFile) close() {
	if l.f != nil {
		l.f.Close()
	}
}
