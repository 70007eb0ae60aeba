//go:build !manifold_image

package cli

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	ucli "github.com/urfave/cli/v2"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// kubeFlags are run's flags for running on a cluster.
func kubeFlags() []ucli.Flag {
	flags := append([]ucli.Flag{
		&ucli.BoolFlag{Name: "kube", Usage: "run on the Kubernetes cluster of the kubeconfig instead of this machine"},
	}, clusterFlags("with --kube: ")...)
	return append(append(flags, []ucli.Flag{
		&ucli.StringFlag{Name: "as", Value: kube.AsJob, Usage: "with --kube: create each step as a `KIND`: job (Jobs, and a Service per multi-node step) or jobset (JobSets)"},
		&ucli.BoolFlag{Name: "keep", Usage: "with --kube: leave the run's objects on the cluster when it succeeds or is interrupted"},
		&ucli.DurationFlag{Name: "pending-grace", Value: kube.DefaultPendingGrace, Usage: "with --kube: report pods the scheduler cannot place after `DURATION`; fail pods that cannot get their image after it"},
		&ucli.BoolFlag{Name: "no-build", Usage: "with --kube: do not build the flow's image for its Run steps; their image must already hold this program"},
		&ucli.StringFlag{Name: "image", Usage: "with --kube: build the flow's image for its Run steps and push it as `REF` (default: the flow's sdk.Image, else manifold.toml's image; on a kind context it is loaded into the cluster instead)"},
		&ucli.BoolFlag{Name: "no-check", Usage: "with --kube: do not check first that the cluster's nodes can take every step (see check); the dry run of what the run creates is made all the same"},
		&ucli.DurationFlag{Name: "pending-timeout", DefaultText: "none: wait", Usage: "with --kube: fail a step whose pods cannot be scheduled for `DURATION`"},
	}...), limitFlags("with --kube: ")...)
}

// clusterFlags are the flags that name the cluster and the namespace of the
// steps without their own; usage begins each flag's usage.
func clusterFlags(usage string) []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "kubeconfig", Usage: usage + "the kubeconfig `FILE` (default: $KUBECONFIG, then ~/.kube/config)"},
		&ucli.StringFlag{Name: "context", Usage: usage + "the kubeconfig `CONTEXT` (default: its current context)"},
		namespaceFlag(usage + "the `NAMESPACE` of steps without their own (default: the context's, or default)"),
	}
}

// namespaceFlag is --namespace (-n), which refuses a value that names no
// namespace the API server could hold, before the cluster is asked anything.
func namespaceFlag(usage string) *ucli.StringFlag {
	return &ucli.StringFlag{Name: "namespace", Aliases: []string{"n"}, Usage: usage,
		Action: func(_ *ucli.Context, ns string) error {
			if msgs := apivalidation.ValidateNamespaceName(ns, false); len(msgs) > 0 {
				return usageErr("--namespace %q: %s; give the name of a namespace, such as ml", ns, strings.Join(msgs, "; "))
			}
			return nil
		}}
}

// limitFlags are the flags that limit the requests made to the API server;
// usage begins each flag's usage.
func limitFlags(usage string) []ucli.Flag {
	return []ucli.Flag{
		&ucli.Float64Flag{Name: "qps", Value: kube.DefaultQPS, Usage: usage + "make at most `N` requests a second to the API server, on average"},
		&ucli.IntFlag{Name: "burst", Value: kube.DefaultBurst, Usage: usage + "let requests to the API server come in bursts of up to `N` above --qps"},
	}
}

// checkAs refuses an --as that names neither kind of object.
func checkAs(c *ucli.Context) error {
	if as := c.String("as"); as != kube.AsJob && as != kube.AsJobSet {
		return usageErr("--as %q: choose %s or %s", as, kube.AsJob, kube.AsJobSet)
	}
	return nil
}

// checkLimits refuses --qps and --burst values client-go cannot take.
func checkLimits(c *ucli.Context) error {
	if q := c.Float64("qps"); q <= 0 || q > math.MaxFloat32 {
		return usageErr("--qps %v: give a positive number of requests a second", q)
	}
	if b := c.Int("burst"); b < 1 {
		return usageErr("--burst %d: give a whole number of requests, 1 or more", b)
	}
	return nil
}

// kubeOnly are the flags that mean nothing without --kube.
var kubeOnly = []string{"kubeconfig", "context", "namespace", "as", "keep", "pending-grace", "pending-timeout", "no-check", "no-build", "image", "qps", "burst"}

// checkKubeFlags refuses flags that belong to the other runtime.
func checkKubeFlags(c *ucli.Context) error {
	if c.Bool("kube") {
		for _, name := range []string{"max-parallel", "strict"} {
			if c.IsSet(name) {
				return usageErr("--%s applies to runs on this machine, not to --kube runs", name)
			}
		}
		if err := checkAs(c); err != nil {
			return err
		}
		if d := c.Duration("pending-grace"); d <= 0 {
			return usageErr("--pending-grace %s: give a positive duration", d)
		}
		if c.Bool("no-build") && c.IsSet("image") {
			return usageErr("--image names the image run --kube builds; leave it out with --no-build")
		}
		if d := c.Duration("pending-timeout"); d < 0 {
			return usageErr("--pending-timeout %s: give a positive duration, or leave it out to wait", d)
		}
		if err := checkLimits(c); err != nil {
			return err
		}
		if id := c.String("run-id"); c.IsSet("run-id") {
			if err := runid.Check(id); err != nil {
				return usageErr("--run-id: %v", err)
			}
		}
		return nil
	}
	for _, name := range kubeOnly {
		if c.IsSet(name) {
			return usageErr("--%s needs --kube", name)
		}
	}
	return nil
}

// runKube runs p, compiled from flow, on the cluster the flags name. A flow with
// Run steps first gets its image built (see build), unless --no-build.
func runKube(c *ucli.Context, flow *sdk.Flow, p *plan.Flow) error {
	tracer, endTracing, err := startTracing(c)
	if err != nil {
		return err
	}
	defer endTracing()
	// The cluster first: an unreachable one fails the run in seconds, before
	// the image is built and pushed.
	if err := cluster.Reachable(c.Context, cluster.Options{
		Kubeconfig: c.String("kubeconfig"),
		Context:    c.String("context"),
		Namespace:  c.String("namespace"),
	}); err != nil {
		return invalidErr(err)
	}
	if !c.Bool("no-build") && hasRunSteps(p) {
		built, err := build(c, flow)
		if err != nil {
			return err
		}
		opts, err := options(c, flow)
		if err != nil {
			return err
		}
		opts.BuiltImage = built
		var errs field.ErrorList
		if p, errs = compile.Compile(flow, opts); len(errs) > 0 {
			printErrors(c.App.ErrWriter, flowName(flow), errs)
			return silentInvalid
		}
	}
	// A Run step's pods run this program, built into the image: a resume
	// runs again a Run step of another build (an image built here is also
	// named by its digest, which is part of the step).
	buildID := ""
	if hasRunSteps(p) {
		exe, err := os.Executable()
		if err != nil {
			return invalidErr(fmt.Errorf("finding this program, which the Run steps run: %w", err))
		}
		if buildID, err = dag.ProgramBuild(exe); err != nil {
			return invalidErr(err)
		}
	}
	width, height, live := terminal(c.App.Writer)
	res, err := kube.Run(c.Context, p, kube.Options{
		Kubeconfig:     c.String("kubeconfig"),
		Context:        c.String("context"),
		Namespace:      c.String("namespace"),
		As:             c.String("as"),
		Keep:           c.Bool("keep"),
		RunID:          c.String("run-id"),
		Build:          buildID,
		PendingGrace:   c.Duration("pending-grace"),
		PendingTimeout: c.Duration("pending-timeout"),
		NoCheck:        c.Bool("no-check"),
		QPS:            float32(c.Float64("qps")),
		Burst:          c.Int("burst"),
		Force:          forceContext(c.Context),
		Stdout:         c.App.Writer,
		Stderr:         c.App.ErrWriter,
		Live:           live,
		Width:          width,
		Height:         height,
		Tracer:         tracer,
	})
	switch {
	case err == nil:
		return nil
	case res != nil && res.State == record.Interrupted:
		return &exitError{code: ExitInterrupted, err: err}
	case errors.Is(err, context.Canceled):
		return &exitError{code: ExitInterrupted, err: err}
	}
	return invalidErr(err)
}

func hasRunSteps(p *plan.Flow) bool {
	for i := range p.Steps {
		if p.Steps[i].Body == plan.BodyRun {
			return true
		}
	}
	return false
}

// build builds the flow program's image for a run on a cluster: loaded into the
// cluster when the context is a kind cluster's (kind-NAME), else pushed to --image
// (or the flow's own image), for nodes to pull by digest.
func build(c *ucli.Context, flow *sdk.Flow) (*built.Record, error) {
	ctxName, err := cluster.ContextName(c.String("kubeconfig"), c.String("context"))
	if err != nil {
		return nil, invalidErr(err)
	}
	req := buildRequest{Tag: c.String("image"), Push: true}
	if name, ok := strings.CutPrefix(ctxName, "kind-"); ok && !c.IsSet("image") {
		req.Push, req.Kind = false, name
		req.Platforms = []v1.Platform{{OS: "linux", Architecture: runtime.GOARCH}}
	}
	fmt.Fprintf(c.App.Writer, "building the flow's image for its Run steps (--no-build skips this)\n")
	built, err := buildImage(c, flow, req)
	if err != nil {
		var ex *exitError
		if errors.As(err, &ex) && ex.err != nil {
			ex.err = fmt.Errorf("building the flow's image for its Run steps (--no-build skips it; --image REF names where it goes): %w", ex.err)
		}
		return nil, err
	}
	return built, nil
}
