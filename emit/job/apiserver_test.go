package job_test

import (
	"strings"
	"testing"
	"time"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/internal/kubevalidate"
	"github.com/manifoldflow/manifold/sdk"
)

// TestShapesAcceptedByAPIServerValidation emits flows that use every pod option, the
// longest names, and a schedule, and puts them through the API server's own
// validation.
func TestShapesAcceptedByAPIServerValidation(t *testing.T) {
	long := strings.Repeat("x", compile.MaxNameLength)
	flows := map[string]*sdk.Flow{
		"every-option": sdk.NewFlow("every", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
			sdk.Namespace("ml"), sdk.ServiceAccount("trainer"), sdk.ImagePullSecret("ecr"),
			sdk.Toleration("dedicated", "ml", "NoSchedule"), sdk.Toleration("", "", "")).
			Step("train", sdk.Command("torchrun", "train.py"), sdk.InstanceType("trn1.32xlarge"),
				sdk.Trainium(16), sdk.EFA(8), sdk.CPU("100"), sdk.Memory("400Gi"), sdk.Disk("500Gi"),
				sdk.SharedMemory("64Gi"), sdk.Resource("example.com/license", 1),
				sdk.NodeSelector("karpenter.sh/capacity-type", "on-demand"),
				sdk.Env("A", "1"), sdk.SecretEnv("TOKEN", "hf", "token"), sdk.Secret("wandb"),
				sdk.Label("team", "ml"), sdk.Annotation("example.com/owner", "ml@example.com"),
				sdk.Volume("data", "/data"), sdk.Volume("ckpt", "/checkpoints"), sdk.Port(29500),
				sdk.RunAsUser(1000), sdk.RunAsNonRoot(true), sdk.ImagePullPolicy("IfNotPresent"),
				sdk.Retry(3), sdk.Timeout(90*time.Minute+500*time.Millisecond)).
			Step("serve", sdk.After("train"), sdk.Command("serve"), sdk.InstanceType("inf2.48xlarge"),
				sdk.Resource("aws.amazon.com/neuroncore", 24)).
			Step("gpu", sdk.After("train"), sdk.Command("nvidia-smi"), sdk.InstanceType("p5.48xlarge"),
				sdk.GPU(8), sdk.EFAAll()).
			Step("amd", sdk.After("train"), sdk.Command("rocm-smi"), sdk.GPU(1), sdk.GPUVendor("amd")),
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
