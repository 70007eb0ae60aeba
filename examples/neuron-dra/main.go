// Command neuron-dra trains on two trn2.48xlarge nodes whose Neuron devices and EFA
// interfaces are claimed through Dynamic Resource Allocation (sdk.DRA) instead of
// device-plugin resources: each node's pod gets a claim of its own for all 16
// Neuron devices and every EFA interface of the instance type (sdk.EFAAll: 16, from
// the instance catalog), which share one resource.aws.com/devicegroup16_id, wired
// so that the Neuron runtime's collectives use them (sdk.EFAWiring). The
// cluster needs the Neuron DRA driver (DeviceClass neuron.aws.com) and the EFA DRA
// driver (DeviceClass efa.networking.k8s.aws); `check` says whether its nodes'
// ResourceSlices hold such devices.
//
//	go run ./examples/neuron-dra compile --target job
package main

import (
	"time"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

// neuronDLC is the AWS Neuron deep learning container that runs the training script.
const neuronDLC = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.29.1-ubuntu24.04"

var flow = sdk.NewFlow("neuron-dra",
	sdk.Image(neuronDLC),
	sdk.Param("epochs", "3"),
).
	Step("train",
		sdk.Command("torchrun", "--nproc_per_node=32", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
		sdk.Nodes(2), sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(16), sdk.EFAAll(), sdk.DRA(), sdk.EFAWiring(),
		// Claimed devices bring no toleration; the node group's taint needs one.
		sdk.Toleration("aws.amazon.com/neuron", "", "NoSchedule"),
		sdk.SharedMemory("64Gi"),
		sdk.Retry(1), sdk.Timeout(6*time.Hour))

func main() { cli.Main(flow) }
