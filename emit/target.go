package emit

import (
	"bytes"
	"iter"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// Target turns a plan into the files of one orchestrator.
type Target interface {
	// Name is the --target value that selects it.
	Name() string
	// Emit returns the target's files for f, or what f asks that the target cannot
	// express. It writes nothing.
	Emit(f *plan.Flow) ([]File, field.ErrorList)
	// Outputs names every file Emit may return for a flow called flow, whatever
	// its steps: compile -o removes those an earlier compile wrote that the
	// current one does not.
	Outputs(flow string) []string
}

// File is one emitted file: a name relative to the output directory, and its bytes.
type File struct {
	Name string
	Data []byte
}

// YAMLFile returns the one YAML file name that holds objects after a header comment,
// or errs when the target could not make the objects.
func YAMLFile(name, header string, objects []any, errs field.ErrorList) ([]File, field.ErrorList) {
	if len(errs) > 0 {
		return nil, errs
	}
	return YAMLStream(name, header, slices.Values(objects))
}

// YAMLStream is YAMLFile for the objects objects yields, each made and written
// in turn, so that none is kept once written: a target of many objects holds
// only its output.
func YAMLStream(name, header string, objects iter.Seq[any]) ([]File, field.ErrorList) {
	var b bytes.Buffer
	if err := WriteYAMLSeq(&b, header, objects); err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	return []File{{Name: name, Data: b.Bytes()}}, nil
}
