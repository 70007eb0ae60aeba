// Command neuron-train prepares data on a CPU node, trains on two trn1.32xlarge
// nodes, each with all 16 Trainium devices and 8 EFA interfaces, and evaluates on an
// Inferentia2 node. torchrun finds the other node through the rendezvous variables
// every node gets (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT), and
// EFAWiring makes the Neuron runtime's collectives use the EFA interfaces.
//
//	go run ./examples/neuron-train compile --target job
package main

import (
	"fmt"
	"time"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// neuronDLC is the AWS Neuron deep learning container that runs the training script.
const neuronDLC = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.29.1-ubuntu24.04"

var flow = sdk.NewFlow("neuron-train",
	sdk.Image("registry.example.com/ml/neuron-train:v1"), // this program, built into an image
	sdk.Param("epochs", "3"),
	sdk.Toleration("dedicated", "ml", "NoSchedule"),
	sdk.Label("team", "ml-platform"),
).
	Step("prepare", sdk.Run(prepare), sdk.CPU("4"), sdk.Memory("16Gi")).
	Step("train", sdk.After("prepare"),
		sdk.Image(neuronDLC),
		sdk.Command("torchrun", "--nproc_per_node=32", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
		sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8),
		sdk.EFAWiring(), sdk.SharedMemory("64Gi"),
		sdk.Volume("training-data", "/data"),
		sdk.Retry(2), sdk.Timeout(6*time.Hour)).
	Step("evaluate", sdk.Run(evaluate), sdk.After("train"),
		sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1))

func prepare(ctx *sdk.Context) error {
	shards := []string{"shard-000", "shard-001", "shard-002", "shard-003"}
	fmt.Printf("prepared %d shards for %s epochs\n", len(shards), ctx.Param("epochs"))
	return ctx.Put("shards", shards)
}

func evaluate(ctx *sdk.Context) error {
	var shards []string
	if err := ctx.Get("prepare", "shards", &shards); err != nil {
		return err
	}
	fmt.Printf("evaluated the model trained on %d shards\n", len(shards))
	return ctx.Put("report", map[string]any{"shards": len(shards), "epochs": ctx.Param("epochs")})
}

func main() { cli.Main(flow) }
