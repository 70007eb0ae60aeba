package emit

import (
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
}

// File is one emitted file: a name relative to the output directory, and its bytes.
type File struct {
	Name string
	Data []byte
}
