//go:build !manifold_image

package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/provision/kind"
	"github.com/manifoldflow/manifold/sdk"
)

func kindCommand(flow *sdk.Flow) *ucli.Command {
	cmd := &ucli.Command{
		Name:  "kind",
		Usage: "make a kind cluster on this machine that rehearses accelerator nodes, load images into it, remove it",
		Description: "kind runs a Kubernetes cluster in containers of docker, podman or nerdctl (the one\n" +
			"KIND_EXPERIMENTAL_PROVIDER names, else the first found). `kind up --simulate` makes its workers\n" +
			"look like EC2 accelerator instances, so steps schedule as on EKS: run the flow on it with\n" +
			"`run --kube --context kind-NAME`.",
		Subcommands: []*ucli.Command{kindUpCommand(), kindLoadCommand(), kindDownCommand()},
	}
	cmd.Action = func(c *ucli.Context) error {
		if c.Args().Present() {
			return usageErr("unknown kind command %q; the kind commands are up, load and down (see %s kind --help)", c.Args().First(), flowName(flow))
		}
		return ucli.ShowSubcommandHelp(c)
	}
	return cmd
}

// kindNameFlag is the --name flag every kind command takes.
func kindNameFlag() *ucli.StringFlag {
	return &ucli.StringFlag{Name: "name", Value: kind.DefaultName, Usage: "the kind cluster's `NAME`; its kubeconfig context is kind-NAME"}
}

// kindUpCommand is `kind up`, which creates and shapes the cluster.
func kindUpCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "up",
		Usage: "create the cluster, shape its workers as instance types, install JobSet or Argo",
		Description: "Creates kind cluster NAME with one control-plane node and one worker per simulated instance\n" +
			"(one plain worker without --simulate), waits until the nodes are Ready, and gives each\n" +
			"simulated worker its instance type's label node.kubernetes.io/instance-type, the\n" +
			"aws.amazon.com/neuron or nvidia.com/gpu NoSchedule taint, and the catalog's Neuron devices,\n" +
			"GPUs and EFA interfaces as allocatable resources (counted, not real devices). When every\n" +
			"worker is an accelerator node, the control plane takes the other pods. A cluster NAME that\n" +
			"exists with the same workers is shaped again. --with installs pinned releases: jobset\n" +
			"(JobSet " + kind.JobSetVersion + ") and argo (Argo Workflows " + kind.ArgoVersion + "); their images are pulled from the network.",
		Flags: []ucli.Flag{
			kindNameFlag(),
			&ucli.StringFlag{Name: "simulate", Usage: "shape workers as instance types, `TYPE=N,...` such as trn1.32xlarge=2,inf2.xlarge=1"},
			&ucli.StringSliceFlag{Name: "with", Usage: "install `COMPONENTS`: jobset, argo (comma-separated or repeated)"},
			&ucli.StringFlag{Name: "image", Usage: "the node `IMAGE`, kindest/node:<version> (default: kind's)"},
			&ucli.BoolFlag{Name: "print-config", Usage: "print the kind cluster config and exit, creating nothing"},
			&ucli.BoolFlag{Name: "watch", Usage: "then stay, applying the simulated capacity again whenever a kubelet resets it, until interrupted"},
		},
		Action: kindUp,
	}
}

// kindUp is the action of `kind up`: it checks the flags, then prints the
// cluster config (--print-config) or creates the cluster and prints its
// kubeconfig context.
func kindUp(c *ucli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	name := c.String("name")
	if err := kind.CheckName(name); err != nil {
		return usageErr("--name: %v", err)
	}
	groups, err := kind.ParseSimulate(c.String("simulate"))
	if err != nil {
		return usageErr("%v", err)
	}
	with, err := kind.ParseWith(c.StringSlice("with"))
	if err != nil {
		return usageErr("%v", err)
	}
	if c.IsSet("image") && strings.TrimSpace(c.String("image")) == "" {
		return usageErr("--image \"\": name a node image, such as kindest/node:v1.35.0, or leave it out for kind's")
	}
	if c.Bool("print-config") {
		data, err := kind.ConfigYAML(kind.Config(name, groups, c.String("image")))
		if err != nil {
			return invalidErr(err)
		}
		_, err = c.App.Writer.Write(data)
		return err
	}
	err = kind.Up(c.Context, kind.Options{
		Name: name, Simulate: groups, With: with, Image: c.String("image"),
		Watch: c.Bool("watch"), Log: c.App.ErrWriter,
	})
	if err != nil {
		return kindErr(c, err)
	}
	if !c.Bool("watch") {
		fmt.Fprintf(c.App.Writer, "kind-%s\n", name)
	}
	return nil
}

// kindLoadCommand is `kind load`, which loads an image into every node.
func kindLoadCommand() *ucli.Command {
	return &ucli.Command{
		Name:      "load",
		Usage:     "load an image into every node of the cluster",
		ArgsUsage: "IMAGE|TARBALL",
		Description: "Loads an image archive (a docker save tarball, or an OCI image layout tarball) into every\n" +
			"node, as `kind load image-archive` does; an image reference (registry.example.com/ml/flow:v1)\n" +
			"is saved from the container engine first. Pods then find the image without pulling it\n" +
			"(imagePullPolicy IfNotPresent, the default for a tag other than latest).",
		Flags: []ucli.Flag{kindNameFlag()},
		Action: func(c *ucli.Context) error {
			if c.NArg() != 1 {
				return usageErr("kind load takes one image reference or image archive, got %d arguments %q (see %s --help)", c.NArg(), c.Args().Slice(), commandPath(c))
			}
			name := c.String("name")
			if err := kind.CheckName(name); err != nil {
				return usageErr("--name: %v", err)
			}
			if err := kind.Load(c.Context, kind.LoadOptions{Name: name, Image: c.Args().First(), Log: c.App.ErrWriter}); err != nil {
				return kindErr(c, err)
			}
			return nil
		},
	}
}

// kindDownCommand is `kind down`, which deletes the cluster.
func kindDownCommand() *ucli.Command {
	return &ucli.Command{
		Name:  "down",
		Usage: "delete the cluster and its kubeconfig context",
		Flags: []ucli.Flag{kindNameFlag()},
		Action: func(c *ucli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			name := c.String("name")
			if err := kind.CheckName(name); err != nil {
				return usageErr("--name: %v", err)
			}
			if err := kind.Down(c.Context, name, c.App.ErrWriter); err != nil {
				return kindErr(c, err)
			}
			return nil
		},
	}
}

// kindErr is the exit of a kind command that failed: 130 if it was interrupted,
// else 1.
func kindErr(c *ucli.Context, err error) error {
	if c.Context.Err() != nil {
		return &exitError{code: ExitInterrupted, err: err}
	}
	return invalidErr(err)
}
