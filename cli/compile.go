package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	emittargets "github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/internal/atomicfile"
	"github.com/manifoldflow/manifold/internal/startgc"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/sdk"
)

func compileCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "compile",
		Usage: "write the flow for an orchestrator",
		Description: "Compiles the flow and writes the target's files to standard output, or into DIR with -o DIR.\n" +
			"Nothing is written unless the whole flow compiles, and DIR's files of the flow change all together\n" +
			"or not at all. Warnings go to standard error; with --strict they are errors and nothing is written.",
		Flags: append([]ucli.Flag{
			&ucli.StringFlag{Name: "target", Aliases: []string{"t"}, Value: "job", Usage: "emit the flow for `TARGET`: " + strings.Join(targetNames(), ", ") + ", or all"},
			&ucli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "-", Usage: "write files into `DIR`; - for standard output"},
			&ucli.BoolFlag{Name: "image-from-build", Usage: "make every Run step's image the one image build recorded in " + built.File},
			strictFlag,
			&ucli.StringFlag{Name: "run-id", Usage: "job and jobset targets: emit the objects of run `ID`, as run --kube creates them (names end in a hash of ID, pods carry " + plan.LabelRun + " and, with an artifact store, " + plan.EnvRunID + "=ID)"},
		}, flowFlags()...),
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			compileGC()
			chosen, err := chooseTargets(c.String("target"))
			if err != nil {
				return err
			}
			dir := c.String("output")
			if dir == "" {
				return usageErr("--output \"\": give a directory, or - for standard output")
			}
			p, err := loadWithBuild(c, flow)
			if err != nil {
				return err
			}
			if err := lint(c, p, c.Bool("strict")); err != nil {
				return err
			}
			if c.IsSet("run-id") {
				if err := runIDFor(c, chosen); err != nil {
					return err
				}
				p.Run = c.String("run-id")
			}
			emitGC()
			if dir != "-" {
				return writeFiles(c, dir, p, chosen)
			}
			var files []emit.File
			for _, t := range chosen {
				out, errs := emit.Files(t, p)
				if len(errs) > 0 {
					printErrors(c.App.ErrWriter, p.Name, errs)
					return silentInvalid
				}
				files = append(files, out...)
			}
			for i, f := range files {
				if len(files) > 1 {
					if i > 0 {
						fmt.Fprintln(c.App.Writer)
					}
					fmt.Fprintf(c.App.Writer, "# file: %s\n", f.Name)
				}
				if _, err := c.App.Writer.Write(f.Data); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// runIDFor checks --run-id: a run ID, for targets whose objects a run names (Argo
// and Airflow name each run themselves).
func runIDFor(c *ucli.Context, chosen []emit.Target) error {
	if err := runid.Check(c.String("run-id")); err != nil {
		return usageErr("--run-id: %v", err)
	}
	for _, t := range chosen {
		if name := t.Name(); name != "job" && name != "jobset" {
			return usageErr("--run-id is for --target job or jobset: on %s each run has its own ID (the workflow's name on Argo, the DAG run's id on Airflow)", name)
		}
	}
	return nil
}

// loadWithBuild is load, with --image-from-build: every Run step's image is the
// one image build recorded.
func loadWithBuild(c *ucli.Context, flow *sdk.Flow) (*plan.Flow, error) {
	if !c.Bool("image-from-build") {
		return load(c, flow)
	}
	opts, err := options(c, flow)
	if err != nil {
		return nil, err
	}
	rec, err := built.Read(built.File)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, invalidErr(fmt.Errorf("--image-from-build: no image has been built here (%s does not exist): run `%s image build --push --tag REF` first", built.File, flowName(flow)))
	}
	if err != nil {
		return nil, invalidErr(fmt.Errorf("--image-from-build: %w", err))
	}
	opts.BuiltImage = &rec
	p, errs := compile.Compile(flow, opts)
	if len(errs) > 0 {
		printErrors(c.App.ErrWriter, flowName(flow), errs)
		return nil, silentInvalid
	}
	return p, nil
}

func chooseTargets(name string) ([]emit.Target, error) {
	if name == "all" {
		return targets, nil
	}
	if t, ok := emittargets.Named(name); ok {
		return []emit.Target{t}, nil
	}
	return nil, usageErr("--target %q: choose one of %s, or all", name, strings.Join(targetNames(), ", "))
}

// compileGC tunes the garbage collector for making a compile's plan, which
// keeps most of what it allocates: collecting when the heap has grown by
// half (not Go's default, doubled) keeps the heap near the plan's size, for
// few more collections, unless GOGC says otherwise. It does so from the
// process's first collection on (startgc.Then): before it, the program's
// start keeps the heap minimum high, so a small flow's compile collects
// nothing at all, and a large one first collects once what it made is worth
// collecting.
func compileGC() {
	startgc.Then(50)
}

// emitGC tunes the garbage collector for emitting a plan, once it is made:
// the targets stream their files, so what they hold besides the plan is
// small and does not grow with the steps, while what they allocate and let
// go does, a great deal. It lets the heap grow to five times what is live,
// within a soft limit of the heap live now (the plan, and what the compile
// left) and emitHeadroom, unless GOGC or GOMEMLIMIT say otherwise.
func emitGC() {
	startgc.Set(400)
	if os.Getenv("GOMEMLIMIT") == "" {
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(live)
		debug.SetMemoryLimit(int64(live[0].Value.Uint64()) + emitHeadroom)
	}
}

// emitHeadroom is the heap the targets may use besides the plan before the
// garbage collector runs as often as it must: what two targets emitted side
// by side hold (a part of an Argo WorkflowTemplate, built whole; the pods of
// a step; write buffers), and room for their garbage.
const emitHeadroom = 48 << 20

// batchGC tunes the garbage collector for validate: a short process that
// allocates a great deal and keeps little, for which Go's default (collect each
// time the heap doubles) spent a fifth of a large compile collecting. It lets
// the heap grow to five times what is live, within a soft limit of 384 MiB
// (past which it collects as often as it must), unless GOGC or GOMEMLIMIT say
// otherwise.
func batchGC() {
	startgc.Set(400)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(384 << 20)
	}
}

// sideBySide calls emit for each of n targets, as many at once as there are
// CPUs, and returns once every call has returned. Each call reports its
// target's outcome where its caller reads it, in the targets' order.
func sideBySide(n int, emit func(i int)) {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range n {
		g.Go(func() error {
			emit(i)
			return nil
		})
	}
	_ = g.Wait()
}

// writeFiles emits p for each chosen target and writes its files into dir,
// each streamed to a temporary file as it is made (so no file is ever whole in
// memory), renamed into place only once every target has been emitted and
// written: a reader never sees a half-written file, and a target that cannot
// express the flow, or an interrupt (SIGINT, SIGTERM) before the renames,
// leaves dir as it was. With the renames it removes the files that chosen
// targets wrote for the flow before and that are no longer part of its output (a
// flow that no longer has DRA steps has no <flow>.claims.yaml), and only those:
// nothing else in dir is touched. The renames and removals are all or nothing
// (atomicfile.Batch.Commit): when one fails, every file is put back as it was,
// so that dir never holds one target's new output beside another's old.
func writeFiles(c *ucli.Context, dir string, p *plan.Flow, chosen []emit.Target) error {
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return invalidErr(err)
	}
	var batch atomicfile.Batch
	committed := false
	defer func() {
		batch.Abort()
		if !committed && errors.Is(statErr, fs.ErrNotExist) {
			os.Remove(dir) // made for this compile, and empty again: leave nothing
		}
	}()
	if err := removeStaleTemps(c, dir, p, chosen); err != nil {
		return err
	}
	written, err := emitTargets(c, dir, p, chosen, &batch)
	if err != nil {
		return err
	}
	if err := c.Context.Err(); err != nil {
		return &exitError{code: ExitInterrupted, err: fmt.Errorf("compile interrupted: nothing written to %s", dir)}
	}
	paths := batch.Paths() // argo and airflow write the same <flow>.claims.yaml once
	removed, err := removeOldOutputs(dir, p, chosen, written, &batch)
	if err != nil {
		return err
	}
	if err := batch.Commit(); err != nil {
		return invalidErr(fmt.Errorf("%w: fix that and compile again, or give -o another directory", err))
	}
	committed = true
	for _, path := range paths {
		fmt.Fprintf(c.App.Writer, "wrote %s\n", path)
	}
	for _, r := range removed {
		fmt.Fprintf(c.App.Writer, "removed %s: no longer part of the flow's %s output\n", r.path, r.target)
	}
	return nil
}

// removeStaleTemps removes the temporary files of the chosen targets' outputs
// in dir that a compile killed before its renames (SIGKILL, out of memory)
// left, and says which it removed.
func removeStaleTemps(c *ucli.Context, dir string, p *plan.Flow, chosen []emit.Target) error {
	// A compile killed before its renames (SIGKILL, out of memory) leaves its
	// temporary files; the next one removes them, once they are old enough not to
	// be a compile's at work beside this one.
	for _, t := range chosen {
		for _, name := range t.Outputs(p.Name) {
			stale, err := atomicfile.RemoveStale(filepath.Join(dir, name), staleTemp)
			for _, path := range stale {
				fmt.Fprintf(c.App.Writer, "removed %s: left by a compile that was stopped before it finished\n", path)
			}
			if err != nil {
				return invalidErr(err)
			}
		}
	}
	return nil
}

// emitTargets emits p for each chosen target into temporary files in dir,
// joined into batch in the targets' order, and returns the names of the files
// written. The first target that cannot express the flow, or whose files
// cannot be written, is reported, and its error returned.
func emitTargets(c *ucli.Context, dir string, p *plan.Flow, chosen []emit.Target, batch *atomicfile.Batch) (map[string]bool, error) {
	// The targets are emitted side by side, as many at once as there are CPUs,
	// each into a batch of its own, joined in the targets' order.
	type result struct {
		batch   atomicfile.Batch
		written []string
		errs    field.ErrorList
		err     error
	}
	results := make([]result, len(chosen))
	defer func() {
		for i := range results {
			results[i].batch.Abort()
		}
	}()
	sideBySide(len(chosen), func(i int) {
		r := &results[i]
		out := tempFiles{dir: dir, batch: &r.batch}
		r.errs = chosen[i].Emit(p, out.create)
		r.written, r.err = out.names, out.close()
	}) // each target's outcome is in its result, reported in order below
	written := map[string]bool{}
	for i := range results {
		r := &results[i]
		switch {
		case r.err != nil: // the target's own errors would be this one's echo
			return nil, invalidErr(r.err)
		case len(r.errs) > 0:
			printErrors(c.App.ErrWriter, p.Name, r.errs)
			return nil, silentInvalid
		}
		for _, name := range r.written {
			written[name] = true
		}
		batch.Join(&r.batch)
	}
	return written, nil
}

// outputRemoval is a file of a target's earlier output that compile removes.
type outputRemoval struct{ path, target string }

// removeOldOutputs adds to batch the removal of the files in dir that the
// chosen targets wrote for the flow before and that are no longer part of
// their output (not in written), and returns them.
func removeOldOutputs(dir string, p *plan.Flow, chosen []emit.Target, written map[string]bool, batch *atomicfile.Batch) ([]outputRemoval, error) {
	// The files the chosen targets wrote before that are no longer part of
	// their output go with the renames, all or nothing.
	var removed []outputRemoval
	for _, t := range chosen {
		for _, name := range t.Outputs(p.Name) {
			if written[name] {
				continue
			}
			written[name] = true // a name two targets share is removed once
			path := filepath.Join(dir, name)
			switch _, err := os.Lstat(path); {
			case err == nil:
				batch.Remove(path)
				removed = append(removed, outputRemoval{path, t.Name()})
			case !errors.Is(err, fs.ErrNotExist):
				return nil, invalidErr(err)
			}
		}
	}
	return removed, nil
}

// staleTemp is the age past which a temporary file of compile -o is taken to be
// left by a compile that was killed.
const staleTemp = 10 * time.Minute

// tempFiles is the emit.Create of writeFiles: each file a target emits goes,
// through a buffer, to its temporary file in batch. It keeps the first error
// of creating or writing a file, so that it is reported as itself rather than
// as the target's.
type tempFiles struct {
	dir   string
	batch *atomicfile.Batch
	names []string // of the files created
	file  *os.File // being written
	buf   *bufio.Writer
	err   error
}

// create finishes the file being written and starts the temporary file of name.
func (t *tempFiles) create(name string) (io.Writer, error) {
	if err := t.close(); err != nil {
		return nil, err
	}
	f, err := t.batch.Create(filepath.Join(t.dir, name))
	if err != nil {
		t.err = err
		return nil, err
	}
	t.names = append(t.names, name)
	t.file = f
	if t.buf == nil {
		t.buf = bufio.NewWriterSize(t, 64<<10)
	}
	t.buf.Reset(t)
	return t.buf, nil
}

// Write writes p to the file being written, keeping the first error.
func (t *tempFiles) Write(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n, err := t.file.Write(p)
	if err != nil {
		t.err = err
	}
	return n, err
}

// close finishes the file being written, and returns the first error.
func (t *tempFiles) close() error {
	if t.file != nil {
		if err := t.buf.Flush(); err != nil && t.err == nil {
			t.err = err
		}
		if err := t.file.Close(); err != nil && t.err == nil {
			t.err = err
		}
		t.file = nil
	}
	return t.err
}
