package job_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/sdk"
)

var cmpIgnoreDetail = cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")

// writeJobs compiles f, emits it, and writes the YAML to dir/name.yaml.
func writeJobs(t *testing.T, f *sdk.Flow, dir, name string) string {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatalf("%s: %v", name, errs.ToAggregate())
	}
	files, errs := job.Target{}.Emit(p)
	if len(errs) > 0 {
		t.Fatalf("%s: %v", name, errs.ToAggregate())
	}
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, files[0].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
