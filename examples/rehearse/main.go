// Command rehearse is a flow to rehearse accelerator placement on a laptop: its
// steps ask for Trainium, EFA and Inferentia as a training flow's would, and run
// as real containers on nodes shaped like trn1.32xlarge and inf2.xlarge (kind up
// --simulate makes such nodes; their devices are counted, not real). Every step
// is Go code that needs no device, so the whole flow runs anywhere.
//
//	go run ./examples/rehearse run                  # on this machine (accelerators ignored)
//	go run ./examples/rehearse kind up --simulate trn1.32xlarge=1,inf2.xlarge=1
//	go run ./examples/rehearse run --kube --context kind-manifold
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

var flow = sdk.NewFlow("rehearse",
	sdk.Image("registry.example.com/manifold/rehearse:v1"),
	sdk.Param("epochs", "2"),
	sdk.CPU("100m"), sdk.Memory("128Mi"),
	// Its steps pass no data, so it needs no artifact store on a cluster.
	sdk.NoArtifacts(),
).
	Step("prepare", sdk.Run(prepare)).
	Step("train", sdk.Run(train), sdk.After("prepare"),
		sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.EFAWiring(),
		sdk.Retry(1), sdk.Timeout(10*time.Minute)).
	Step("evaluate", sdk.Run(evaluate), sdk.After("train"),
		sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1))

// prepare stands for a step that needs no accelerator.
func prepare(ctx *sdk.Context) error {
	fmt.Printf("preparing %s epochs of data\n", ctx.Param("epochs"))
	return nil
}

// train stands for a training step: it asks for every Neuron device and EFA
// interface of a trn1.32xlarge, and shows the EFA wiring its container got.
func train(ctx *sdk.Context) error {
	fmt.Printf("training for %s epochs with FI_PROVIDER=%q\n", ctx.Param("epochs"), os.Getenv("FI_PROVIDER"))
	return nil
}

// evaluate stands for an inference step on one Inferentia device.
func evaluate(ctx *sdk.Context) error {
	fmt.Println("evaluating on inf2")
	return nil
}

func main() { cli.Main(flow) }
