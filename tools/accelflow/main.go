// Command accelflow is the 12-step benchmark flow: foreach, a branch and its join,
// a two-node step, Trainium+EFA, GPU and Inferentia steps. It mirrors a Metaflow
// flow of the same shape, so compile times and output sizes compare side by side.
// It lives beside the generated flows rather than under examples/, whose every
// flow the end-to-end tests run on the simulated cluster.
package main

import (
	"time"

	"github.com/manifoldflow/manifold/cli"
	"github.com/manifoldflow/manifold/sdk"
)

func nop(*sdk.Context) error { return nil }

func start(ctx *sdk.Context) error { return ctx.Put("items", []int{1, 2, 3}) }

var flow = sdk.NewFlow("accelflow", sdk.Image("python:3.11"), sdk.Param("alpha", "0.5")).
	Step("start", sdk.Run(start),
		sdk.Retry(2), sdk.RetryBackoff(time.Minute), sdk.Timeout(10*time.Minute),
		sdk.Env("FOO", "bar"),
		sdk.CPU("2"), sdk.Memory("8192Mi"), sdk.Disk("20480Mi"),
		sdk.InstanceType("trn1.32xlarge"), sdk.Toleration("dedicated", "ml", "NoSchedule"),
		sdk.Label("team", "ml"), sdk.Annotation("owner", "me"),
		sdk.Trainium(16), sdk.EFA(8), sdk.SharedMemory("1024Mi")).
	Step("fan", sdk.Run(nop), sdk.After("start"), sdk.Foreach("1", "2", "3"), sdk.GPU(1)).
	Step("join", sdk.Run(nop), sdk.After("fan")).
	Step("mid", sdk.Run(nop), sdk.After("join")).
	Step("a", sdk.Run(nop), sdk.After("mid")).
	Step("b", sdk.Run(nop), sdk.After("mid")).
	Step("ab", sdk.Run(nop), sdk.After("a", "b")).
	Step("pre", sdk.Run(nop), sdk.After("ab")).
	Step("train", sdk.Run(nop), sdk.After("pre"), sdk.Nodes(2), sdk.CPU("4"), sdk.Memory("16384Mi")).
	Step("tjoin", sdk.Run(nop), sdk.After("train")).
	Step("serve", sdk.Run(nop), sdk.After("tjoin"), sdk.InstanceType("inf2.xlarge"), sdk.Inferentia(1)).
	Step("end", sdk.Run(nop), sdk.After("serve"))

func main() { cli.Main(flow) }
