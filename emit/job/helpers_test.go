package job_test

import (
	"testing"

	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/sdk"
)

var cmpIgnoreDetail = cmpopts.IgnoreFields(field.Error{}, "BadValue", "Detail")

// writeJobs compiles f, emits it, and writes the YAML to dir/name.yaml.
func writeJobs(t *testing.T, f *sdk.Flow, dir, name string) string {
	t.Helper()
	return testflows.Write(t, job.Target{}, f, dir, name)
}
