package job_test

import (
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/sdk"
)

// TestShapesAcceptedByAPIServerValidation emits flows that use every pod option, the
// longest names, and a schedule, and puts them through the API server's own
// validation.
func TestShapesAcceptedByAPIServerValidation(t *testing.T) {
	long := strings.Repeat("x", compile.MaxNameLength)
	flows := map[string]*sdk.Flow{
		"every-option": testflows.EveryOption(),
		"longest-names": sdk.NewFlow(long, sdk.Image("busybox")).
			Step(long, sdk.Command("true"), sdk.Foreach("a", "b")).
			Step(strings.Repeat("y", compile.MaxNameLength), sdk.Command("true"), sdk.After(long)),
		"multi-node": sdk.NewFlow(long, sdk.Image("busybox")).
			Step(long, sdk.Command("torchrun", "train.py"), sdk.Nodes(1000), sdk.InstanceType("trn1.32xlarge"),
				sdk.Trainium(16), sdk.EFA(8), sdk.Retry(2), sdk.Timeout(time.Hour)).
			Step("sweep", sdk.Command("true"), sdk.Foreach("a", "b"), sdk.Nodes(2), sdk.Port(1234)),
		"cronjob": sdk.NewFlow(long, sdk.Image("busybox"), sdk.Schedule("0 3 * * *")).
			Step(long, sdk.Command("true")),
	}
	var paths []string
	dir := t.TempDir()
	for name, f := range flows {
		paths = append(paths, writeJobs(t, f, dir, name))
	}
	if out, ok := kubevalidate.Run(t, paths...); !ok {
		t.Errorf("the API server's validation refuses Job target output:\n%s", out)
	}
}
