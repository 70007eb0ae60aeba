package emit

import (
	"bytes"
	"io"
	"iter"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/plan"
)

// Target turns a plan into the files of one orchestrator.
type Target interface {
	// Name is the --target value that selects it.
	Name() string
	// Emit writes the target's files for f, one after another, each to the
	// writer create returns for its name (which it writes to until it creates
	// the next or returns), or returns what f asks that the target cannot
	// express. A flow it cannot express is mostly found before anything is
	// created; when Emit returns errors, whatever it wrote is to be thrown away.
	// Writing streams each file as it is made, so that a flow of many steps is
	// never held whole as text: Files keeps them in memory instead.
	Emit(f *plan.Flow, create Create) field.ErrorList
	// Outputs names every file Emit may write for a flow called flow, whatever
	// its steps: compile -o removes those an earlier compile wrote that the
	// current one does not.
	Outputs(flow string) []string
}

// Create opens the file name of a target's output, relative to the output
// directory, for writing.
type Create func(name string) (io.Writer, error)

// File is one emitted file: a name relative to the output directory, and its bytes.
type File struct {
	Name string
	Data []byte
}

// Files returns the files t emits for f, held in memory, in the order t writes
// them (a name written twice keeps its place and its last content).
func Files(t Target, f *plan.Flow) ([]File, field.ErrorList) {
	var names []string
	bufs := map[string]*bytes.Buffer{}
	errs := t.Emit(f, func(name string) (io.Writer, error) {
		b := bufs[name]
		if b == nil {
			b = &bytes.Buffer{}
			bufs[name] = b
			names = append(names, name)
		}
		b.Reset()
		return b, nil
	})
	if len(errs) > 0 {
		return nil, errs
	}
	files := make([]File, len(names))
	for i, name := range names {
		files[i] = File{Name: name, Data: bufs[name].Bytes()}
	}
	return files, nil
}

// Discard is a Create whose files are thrown away as they are written: for
// checking that a target can express a flow.
func Discard(string) (io.Writer, error) { return io.Discard, nil }

// YAMLStream writes the one YAML file name that holds, after a header comment,
// the objects objects yields, each made and written in turn, so that none is
// kept once written.
func YAMLStream(create Create, name, header string, objects iter.Seq[any]) field.ErrorList {
	w, err := create(name)
	if err == nil {
		err = encode.WriteYAMLSeq(w, header, objects)
	}
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return nil
}
