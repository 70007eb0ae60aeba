package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/dag"
)

// programError is why the program of a Command step cannot start on this
// machine: it is not found, or not executable. Every attempt would fail
// alike, so it is not retried (dag.ErrCannotStart).
type programError struct {
	step, program string
	err           error
}

func (e *programError) Error() string {
	return e.program + ": " + missing(e.program, e.err) + ": " + advice(e.step)
}

func (e *programError) Unwrap() []error { return []error{dag.ErrCannotStart, e.err} }

// missing says what is wrong with program, which could not start with err.
func missing(program string, err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return "not found in PATH"
	case errors.Is(err, syscall.EISDIR):
		return "a directory, not a program"
	case errors.Is(err, syscall.ENOEXEC):
		return "not a program this machine can run"
	case errors.Is(err, fs.ErrPermission):
		return "not executable"
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat(program); serr == nil {
			// execve says ENOENT of a script whose interpreter is missing.
			return "its interpreter (its #! line) is not on this machine"
		}
		return "no such file"
	}
	return err.Error()
}

// advice says what to do about a Command step whose program this machine
// lacks: give it the program, run the flow where it is, or rehearse the flow
// here without running the step.
func advice(step string) string {
	return "install it on this machine, run the flow on a cluster (run --kube), or rehearse the flow here with the step stubbed (run --stub " + step + ")"
}

// cannotStart reports whether err, the error of starting a step's process,
// says its program cannot run here, however often it is tried.
func cannotStart(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR)
}

// envPath is the PATH of env, a process's environment: its last PATH, as the
// process reads it.
func envPath(env []string) string {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// MissingError lists the Command steps whose programs this machine lacks: a run
// that would start them is refused before any step runs.
type MissingError struct {
	Flow string
	// Problems name each step's program (steps[NAME].command[0]) and what is
	// wrong with it.
	Problems field.ErrorList
	// Steps are the steps, in flow order.
	Steps []string
}

// Error says which programs are missing, and what to do.
func (e *MissingError) Error() string {
	lines := []string{fmt.Sprintf("flow %s cannot run on this machine, which lacks the programs of %s:", e.Flow, plural(len(e.Steps), "step", "steps"))}
	for _, p := range e.Problems {
		lines = append(lines, "  "+p.Error())
	}
	stubs := make([]string, len(e.Steps))
	for i, s := range e.Steps {
		stubs[i] = "--stub " + s
	}
	lines = append(lines, "install them on this machine, run the flow on a cluster (run --kube), or rehearse it here with those steps stubbed: run "+strings.Join(stubs, " "))
	return strings.Join(lines, "\n")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// lacking returns the error that says which of the Command steps of f that
// the run starts (all but those stubbed) have a program this machine lacks,
// looked up as the step's process is started (findProgram, in the PATH the
// step gets), nil when none does. dir is the run directory.
func lacking(f *plan.Flow, dir string, stubbed map[string]bool) error {
	e := &MissingError{Flow: f.Name}
	r := &runner{Run: dag.New(f, "", dir)}
	// found holds what each program, in each PATH, was found to be: many
	// steps run the same one.
	found := map[[2]string]error{}
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.Body != plan.BodyCommand || stubbed[s.Name] || len(s.Command) == 0 {
			continue
		}
		// A foreach step's items run one program, but for a program named
		// by a variable ($(MANIFOLD_ITEM)): each distinct one is looked up.
		indexes := []int{-1}
		if s.Foreach != nil {
			indexes = []int{0}
			if strings.Contains(s.Command[0], "$(") || slices.ContainsFunc(s.Env, func(e plan.EnvVar) bool { return e.Name == "PATH" && strings.Contains(e.Value, "$(") }) {
				indexes = make([]int, len(s.Foreach))
				for i := range indexes {
					indexes[i] = i
				}
			}
		}
		for _, index := range indexes {
			argv, env, _ := r.command(newTask(dir, dag.NewUnit(s, index)))
			key := [2]string{argv[0], envPath(env)}
			err, seen := found[key]
			if !seen {
				_, err = findProgram(key[0], key[1])
				found[key] = err
			}
			if err != nil {
				e.Steps = append(e.Steps, s.Name)
				e.Problems = append(e.Problems, field.NotFound(field.NewPath("steps").Key(s.Name).Child("command").Index(0), argv[0]))
				e.Problems[len(e.Problems)-1].Detail = missing(argv[0], err)
				break
			}
		}
	}
	if len(e.Steps) == 0 {
		return nil
	}
	return e
}

// isExecutable returns nil when file is a regular file with execute
// permission, else why not.
func isExecutable(file string) error {
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	switch {
	case info.IsDir():
		return &fs.PathError{Op: "exec", Path: file, Err: syscall.EISDIR}
	case info.Mode()&0o111 == 0:
		return &fs.PathError{Op: "exec", Path: file, Err: fs.ErrPermission}
	}
	return nil
}

// searchPath finds name in path, a PATH, as a process's exec does: a name with
// a slash is that file (relative to the working directory), another is the
// first executable file of that name in path's directories (an empty one is
// the working directory).
func searchPath(name, path string) (string, error) {
	if strings.Contains(name, "/") {
		if err := isExecutable(name); err != nil {
			return "", err
		}
		return name, nil
	}
	var first error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		file := filepath.Join(dir, name)
		err := isExecutable(file)
		if err == nil {
			if !filepath.IsAbs(file) && !strings.HasPrefix(file, ".") {
				file = "." + string(filepath.Separator) + file
			}
			return file, nil
		}
		if first == nil && !errors.Is(err, fs.ErrNotExist) {
			first = err
		}
	}
	if first != nil {
		// A file of that name that cannot run says more than "not found".
		return "", first
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}
