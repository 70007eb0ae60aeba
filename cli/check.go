//go:build !manifold_image

package cli

import (
	"fmt"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/manifoldflow/manifold/output"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/sdk"
)

// ExitUnreachable is check's status when it could not ask the cluster: it cannot
// be reached, or does not let this user list its nodes.
const ExitUnreachable = 2

func checkCommand(flow *sdk.Flow) *ucli.Command {
	return &ucli.Command{
		Name:  "check",
		Usage: "check that a cluster's nodes can run every step, before submitting anything",
		Description: "For every step, lists the nodes that pass its node selector and tolerations and advertise\n" +
			"enough allocatable of each resource it asks for (Neuron devices, EFA interfaces, GPUs, CPU, memory).\n" +
			"A step no node can take — or, for a multi-node step, fewer nodes than it runs on — would stay\n" +
			"Pending for ever: it is named with the reason. The nodes a step with EFA targets must all\n" +
			"advertise the same number of EFA interfaces; a mixed or partial rollout fails closed, with the\n" +
			"counts seen. sdk.EFAAll() resolves to that count.\n\n" +
			"What RBAC would refuse run --kube (see --rbac) is a note, one per verb refused.\n\n" +
			"Then every object a run would create (as --as makes it, in --namespace), and each step's pod,\n" +
			"is dry-run on the cluster (dryRun=All): a step that admission refuses (Pod Security, a LimitRange,\n" +
			"a ResourceQuota, a webhook) is named with the field and what refused it. Nothing is created.\n\n" +
			"With --rbac, prints instead the RBAC a user needs for run --kube of the flow (as --as makes it,\n" +
			"in --namespace): a Role per namespace, with the verbs the run uses on the kinds it creates and\n" +
			"reads, a comment on each rule saying why, and a ClusterRole of the cluster-scoped reads the run\n" +
			"does without, with a note, when they are refused. `kubectl apply -f` takes it. run --kube asks the\n" +
			"cluster about each rule before it creates anything. No cluster is asked.\n\n" +
			"Exit status: 0 when every step can be placed, 1 when one cannot, 2 when the cluster cannot be\n" +
			"asked (unreachable, or no RBAC to list nodes). run --kube makes the same check first.",
		Flags:  checkFlags(),
		Action: func(c *ucli.Context) error { return check(c, flow) },
	}
}

// checkFlags are the check command's flags: the cluster's, the limits of its
// client and the flow's.
func checkFlags() []ucli.Flag {
	return append([]ucli.Flag{
		&ucli.StringFlag{Name: "kubeconfig", Usage: "the kubeconfig `FILE` (default: $KUBECONFIG, then ~/.kube/config)"},
		&ucli.StringFlag{Name: "context", Usage: "the kubeconfig `CONTEXT` (default: its current context)"},
		namespaceFlag("the `NAMESPACE` of steps without their own, where the dry run asks (default: the context's, or default)"),
		&ucli.StringFlag{Name: "as", Value: kube.AsJob, Usage: "dry-run each step as a `KIND`: job or jobset, as run --kube --as would create it"},
		outputFlag(),
		&ucli.BoolFlag{Name: "rbac", Usage: "print the Role (and ClusterRole) a user needs for run --kube of the flow, as YAML, and ask no cluster"},
	}, append(limitFlags(""), flowFlags()...)...)
}

// check is the check command's action: whether the cluster's nodes can run
// every step, as a table or the document --output asks for, or with --rbac the
// RBAC that run --kube of the flow needs.
func check(c *ucli.Context, flow *sdk.Flow) error {
	if err := noArgs(c); err != nil {
		return err
	}
	format, err := outputFormat(c)
	if err != nil {
		return err
	}
	if err := checkLimits(c); err != nil {
		return err
	}
	p, err := load(c, flow)
	if err != nil {
		return err
	}
	if err := checkAs(c); err != nil {
		return err
	}
	if c.Bool("rbac") {
		return printRBAC(c, p)
	}
	report, err := kube.Check(c.Context, p, kube.Options{
		Kubeconfig: c.String("kubeconfig"), Context: c.String("context"),
		Namespace: c.String("namespace"), As: c.String("as"),
		QPS: float32(c.Float64("qps")), Burst: c.Int("burst"),
	})
	if err != nil {
		return &exitError{code: ExitUnreachable, err: err}
	}
	if format != output.Table {
		if err := output.Write(c.App.Writer, format, output.NewCheck(report)); err != nil {
			return err
		}
	} else if err := printReport(c, report); err != nil {
		return err
	}
	if !report.OK {
		return silentInvalid
	}
	return nil
}

// printRBAC prints, as YAML, the Role (and ClusterRole) a user needs for run
// --kube of p (check --rbac).
func printRBAC(c *ucli.Context, p *plan.Flow) error {
	if c.IsSet("output") {
		return usageErr("--rbac prints YAML: leave out --output")
	}
	data, err := kube.RBAC(p, kube.Options{
		Kubeconfig: c.String("kubeconfig"), Context: c.String("context"),
		Namespace: c.String("namespace"), As: c.String("as"),
	})
	if err != nil {
		return invalidErr(err)
	}
	_, err = c.App.Writer.Write(data)
	return err
}

// printReport writes the report as a table, then why each step that cannot be
// placed cannot.
func printReport(c *ucli.Context, r *placement.Report) error {
	fmt.Fprintf(c.App.Writer, "cluster %s (context %s): %s\n", r.Cluster, r.Context, display.Count(r.NodeCount, "node"))
	rows := [][]string{{"STEP", "NEEDS", "FITS", "RESULT"}}
	for _, p := range r.Steps {
		needs := display.Count(p.Nodes, "node")
		if p.EFA > 0 {
			needs += ", " + strconv.Itoa(p.EFA) + " EFA each"
		}
		fits := strconv.Itoa(len(p.Fit)) + "/" + strconv.Itoa(r.NodeCount)
		if len(p.Fit) > 0 {
			fits += ": " + strings.Join(p.Fit[:min(len(p.Fit), 3)], ", ")
			if len(p.Fit) > 3 {
				fits += fmt.Sprintf(" and %d more", len(p.Fit)-3)
			}
		}
		result := "ok"
		if !p.OK {
			result = "cannot be placed"
		}
		rows = append(rows, []string{p.Step, needs, fits, result})
	}
	if err := writeTable(c.App.Writer, rows); err != nil {
		return err
	}
	for _, n := range r.Notes {
		fmt.Fprintf(c.App.ErrWriter, "note: %s\n", n)
	}
	for _, p := range r.Unplaceable() {
		fmt.Fprintf(c.App.ErrWriter, "step %s cannot be placed: %s\n", p.Step, p.Reason)
	}
	return nil
}
