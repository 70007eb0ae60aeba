// Command gpu-efa trains on two p5.48xlarge nodes, each with its 8 H100 GPUs and
// every one of its 32 EFA interfaces, wired so that NCCL uses them (through
// aws-ofi-nccl, which the image must hold) instead of falling back to TCP.
//
//	go run ./examples/gpu-efa compile --target job
package main

import (
	"time"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

var flow = sdk.NewFlow("gpu-efa",
	sdk.Image("nvcr.io/nvidia/pytorch:25.01-py3"),
	sdk.Param("model", "llama-8b"),
	sdk.ImagePullSecret("ngc"),
).
	Step("train",
		sdk.Command("torchrun", "--nproc_per_node=8", "train.py", "--model", "$(MANIFOLD_PARAM_MODEL)"),
		sdk.Nodes(2), sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll(), sdk.EFAWiring(),
		sdk.CPU("96"), sdk.Memory("1024Gi"), sdk.SharedMemory("128Gi"),
		sdk.Env("NCCL_DEBUG", "WARN"),
		sdk.SecretEnv("HF_TOKEN", "huggingface", "token"),
		sdk.RunAsUser(1000), sdk.RunAsNonRoot(true),
		sdk.Retry(1), sdk.Timeout(12*time.Hour))

func main() { cli.Main(flow) }
