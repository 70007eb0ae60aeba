package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/runid"
)

// What a run directory's files may hold, far above what any runner writes: a
// file larger than this, or of more JSON values, is refused before it is
// decoded. A run.json holds a few values for each step (a flow has at most
// compile.MaxTasks), a state.json one for each pod of a step's last attempt
// (at most compile.MaxNodes).
const (
	maxRecordBytes  = 32 << 20
	maxRecordValues = 8 * compile.MaxTasks
	maxTaskBytes    = 16 << 20
	maxTaskValues   = 2*compile.MaxNodes + 100
)

// Runtimes that name their runs: their run IDs are the engine's (an Argo
// workflow's name, an Airflow DAG run's ID), which runid.CheckStore holds to.
var engineRuntimes = map[Runtime]bool{Argo: true, Airflow: true}

// states are the known States.
var states = []State{Pending, Queued, Running, Retrying, Succeeded, Failed, Skipped, Interrupted, Abandoned}

// checkState refuses a State not among states.
func checkState(at *field.Path, s State) field.ErrorList {
	if slices.Contains(states, s) {
		return nil
	}
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return field.ErrorList{field.NotSupported(at, s, names)}
}

// damagedError says that a file of a run directory is not a record that a
// runner wrote, and what to do about it.
func damagedError(dir, path, what string) error {
	return fmt.Errorf("%s: %s: the run's record is damaged; delete the run directory %s (or move it away) to go on without it", path, what, dir)
}

// maxShown bounds the part of a value that an error shows.
const maxShown = 64

// mostErrors is how many of a record's errors its error shows; the checks stop
// at one more.
const mostErrors = 3

// fieldErrors words errs for damagedError: the first few, and that there are
// more.
func fieldErrors(errs field.ErrorList) string {
	words := make([]string, 0, mostErrors+1)
	for i, e := range errs {
		if i == mostErrors {
			words = append(words, "and more")
			break
		}
		if v, ok := e.BadValue.(string); ok && len(v) > maxShown {
			// A record's value can be as long as its file: show its start.
			short := *e
			short.BadValue = strings.ToValidUTF8(v[:maxShown], "") + "…"
			e = &short
		}
		words = append(words, e.Error())
	}
	return strings.Join(words, "; ")
}

// readJSON decodes the file rel of run directory dir, opened through root so
// that no path leaves the directory, into v; a file larger than limit is
// refused before it is read, and one of more than maxValues JSON values
// before it is decoded. A missing file is an error that wraps
// fs.ErrNotExist.
func readJSON(root *os.Root, dir, rel string, limit int64, maxValues int, v any) error {
	path := filepath.Join(dir, rel)
	f, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return damagedError(dir, path, "not a regular file")
	}
	tooLarge := damagedError(dir, path, fmt.Sprintf("larger than the %d bytes a runner writes", limit))
	if info.Size() > limit {
		return tooLarge
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return err
	}
	if int64(len(data)) > limit {
		return tooLarge
	}
	if n := jsonValues(data, maxValues); n > maxValues {
		return damagedError(dir, path, fmt.Sprintf("more than the %d values a runner writes", maxValues))
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field != "" {
			return damagedError(dir, path, fmt.Sprintf("%s: Invalid value: JSON %s, where the record holds %s", typeErr.Field, typeErr.Value, typeErr.Type))
		}
		return damagedError(dir, path, "not a record as runners write it ("+err.Error()+")")
	}
	return nil
}

// jsonValues counts, without decoding data, the values of the JSON text it
// holds (each element of an array, each member of an object, and each array
// and object itself), from what separates and opens them outside strings; it
// stops counting past limit.
func jsonValues(data []byte, limit int) int {
	n := 1
	inString, escaped := false, false
	for _, c := range data {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ',' || c == '[' || c == '{':
			if n++; n > limit {
				return n
			}
		}
	}
	return n
}

// check says what in rec, the run.json of run directory dir, no runner writes.
func (rec *Record) check(dir string) field.ErrorList {
	errs := compile.CheckFlowName(field.NewPath("flow"), rec.Flow)
	idPath := field.NewPath("id")
	checkID := runid.Check
	if engineRuntimes[rec.Runtime] {
		checkID = runid.CheckStore
	}
	if base := filepath.Base(dir); rec.ID != base {
		errs = append(errs, field.Invalid(idPath, rec.ID, "must be the name of the run directory, "+base))
	} else if err := checkID(rec.ID); err != nil {
		errs = append(errs, field.Invalid(idPath, rec.ID, err.Error()))
	}
	errs = append(errs, checkState(field.NewPath("state"), rec.State)...)
	if !slices.Contains(runtimes, rec.Runtime) {
		names := make([]string, len(runtimes))
		for i, r := range runtimes {
			names[i] = string(r)
		}
		errs = append(errs, field.NotSupported(field.NewPath("runtime"), string(rec.Runtime), names))
	}
	if rec.As != "" && rec.As != "job" && rec.As != "jobset" {
		errs = append(errs, field.NotSupported(field.NewPath("as"), rec.As, []string{"job", "jobset"}))
	}
	if a := rec.Artifacts; a != nil && a.Claim == "" && !strings.HasPrefix(a.URL, "s3://") {
		// A cluster run's store is an S3 bucket or a volume claim; the record
		// never names a directory of this machine.
		errs = append(errs, field.Invalid(field.NewPath("artifacts", "url"), a.URL, "must be an s3:// URL, or the mount path of a volume claim"))
	}
	for i, sp := range rec.Spans {
		if !sp.End.IsZero() && sp.End.Before(sp.Start) {
			errs = append(errs, field.Invalid(field.NewPath("spans").Index(i).Child("end"), sp.End.Format(time.RFC3339Nano), "must not be before the span's start"))
			break
		}
	}
	stepsPath := field.NewPath("steps")
	if len(rec.Steps) > compile.MaxTasks {
		return append(errs, field.TooMany(stepsPath, len(rec.Steps), compile.MaxTasks))
	}
	seen := make(map[string]bool, len(rec.Steps))
	tasks := 0
	for i, s := range rec.Steps {
		if len(errs) > mostErrors {
			return errs
		}
		at := stepsPath.Index(i)
		errs = append(errs, compile.CheckStepName(at.Child("name"), s.Name)...)
		for j, after := range s.After {
			if len(errs) > mostErrors {
				return errs
			}
			if !seen[after] {
				errs = append(errs, field.NotFound(at.Child("after").Index(j), after))
			}
		}
		if seen[s.Name] {
			errs = append(errs, field.Duplicate(at.Child("name"), s.Name))
		}
		seen[s.Name] = true
		if s.Items < 0 || s.Items > compile.MaxTasks {
			errs = append(errs, field.Invalid(at.Child("items"), s.Items, fmt.Sprintf("must be from 0 to %d foreach items", compile.MaxTasks)))
			continue
		}
		tasks += max(s.Items, 1)
	}
	if tasks > compile.MaxTasks {
		errs = append(errs, field.Invalid(stepsPath, tasks, fmt.Sprintf("more than the %d tasks a flow may have", compile.MaxTasks)))
	}
	return errs
}

// check says what in t, the state.json of step (index, or -1) that Read looked
// for, no runner writes.
func (t *Task) check(step string, index int) field.ErrorList {
	var errs field.ErrorList
	if t.Step != step {
		errs = append(errs, field.Invalid(field.NewPath("step"), t.Step, "must be "+step+", the step whose state it is"))
	}
	if t.index() != index {
		want := "none, as the step has no foreach items"
		if index >= 0 {
			want = strconv.Itoa(index) + ", the item whose state it is"
		}
		errs = append(errs, field.Invalid(field.NewPath("index"), t.Index, "must be "+want))
	}
	errs = append(errs, checkState(field.NewPath("state"), t.State)...)
	if t.Attempts < 0 || t.Attempts > compile.MaxRetry+1 {
		errs = append(errs, field.Invalid(field.NewPath("attempts"), t.Attempts, fmt.Sprintf("must be from 0 to %d attempts", compile.MaxRetry+1)))
	}
	return errs
}

// checkTask refuses a step name or index that names no task's directory.
func checkTask(step string, index int) error {
	if errs := compile.CheckStepName(field.NewPath("step"), step); len(errs) > 0 {
		return errs.ToAggregate()
	}
	if index < -1 {
		return fmt.Errorf("step %s: index %d: a foreach item's index is 0 or more, -1 for a step without items", step, index)
	}
	return nil
}
