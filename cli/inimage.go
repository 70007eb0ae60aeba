//go:build manifold_image

package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// This file is the flow program as `image build` builds it for a container
// image (the build tag manifold_image): the commands that only a workstation
// runs — run --kube, check, image and kind — are left out of it, with the
// client-go clients and informers, kind and the image builder they link, so
// that every pod pulls and starts a small program. Their names stay, and say
// where they run. The program built with a plain `go build` has them all.
//
// The files left out carry `//go:build !manifold_image` (runkube.go, check.go,
// image.go, kind.go, and lifecycle.go and airflowcmd.go, which deploy to Argo
// and Airflow and manage runs there). A command that calls what they define, or that only a
// workstation runs, is left out the same way, with a stand-in here;
// TestImageProgramBuilds builds the package with these tags.

// ExitUnreachable is check's status when it could not ask the cluster; the
// program in an image has no check, but keeps the status for the same meaning.
const ExitUnreachable = 2

// workstationOnly is the error of a workstation command in the program of an
// image.
func workstationOnly(what string) error {
	return usageErr("%s runs from a workstation: this flow program was built for a container image (build tag manifold_image), without it; use the flow program built with go build", what)
}

// workstationCommand is a command of the workstation's program, here only to
// say so.
func workstationCommand(name, usage string) *ucli.Command {
	return &ucli.Command{
		Name:            name,
		Usage:           usage + " (not in the program of an image)",
		SkipFlagParsing: true,
		Action:          func(*ucli.Context) error { return workstationOnly(name) },
	}
}

func checkCommand(*sdk.Flow) *ucli.Command {
	return workstationCommand("check", "check that a cluster's nodes can run every step, before submitting anything")
}

func imageCommand(*sdk.Flow) *ucli.Command {
	return workstationCommand("image", "build the flow program's container image")
}

func kindCommand(*sdk.Flow) *ucli.Command {
	return workstationCommand("kind", "make a kind cluster on this machine that rehearses accelerator nodes, load images into it, remove it")
}

// kubeFlags keeps --kube, which the program of an image refuses.
func kubeFlags() []ucli.Flag {
	return []ucli.Flag{&ucli.BoolFlag{Name: "kube", Usage: "run on a Kubernetes cluster (not in the program of an image)"}}
}

func checkKubeFlags(c *ucli.Context) error {
	if c.Bool("kube") {
		return workstationOnly("run --kube")
	}
	return nil
}

func runKube(*ucli.Context, *sdk.Flow, *plan.Flow) error {
	return workstationOnly("run --kube")
}

// lifecycleCommands keeps the names of the commands that deploy the flow to
// Argo Workflows or Airflow and manage its runs there.
func lifecycleCommands(*sdk.Flow) []*ucli.Command {
	var cmds []*ucli.Command
	for _, name := range []string{"deploy", "undeploy", "trigger", "stop", "suspend", "unsuspend", "retry"} {
		cmds = append(cmds, workstationCommand(name, name+" the flow or its runs on Argo Workflows or Airflow"))
	}
	return cmds
}

// targetRunsFlags keeps --target of runs list, runs show and logs, which the
// program of an image refuses.
func targetRunsFlags() []ucli.Flag {
	return []ucli.Flag{&ucli.StringFlag{Name: "target", Usage: "read the flow's runs on `TARGET`, argo or airflow (not in the program of an image)"}}
}

func targetRunsList(*ucli.Context, *sdk.Flow) error {
	return workstationOnly("runs list --target")
}

func targetRunsShow(*ucli.Context, *sdk.Flow, string) error {
	return workstationOnly("runs show --target")
}

func targetLogs(*ucli.Context, *sdk.Flow, string, string) error {
	return workstationOnly("logs --target")
}
