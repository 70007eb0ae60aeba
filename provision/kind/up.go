// Package kind makes, loads and removes kind clusters (Kubernetes in
// containers of docker, podman or nerdctl) with the sigs.k8s.io/kind library,
// for `<flow> kind up|load|down`.
//
// Up can make the workers rehearse EC2 accelerator instances: with --simulate
// trn1.32xlarge=2,inf2.xlarge=1 the cluster gets one control-plane node and one
// worker per simulated instance, each worker recording its instance type in the
// label LabelSimulate (set in the generated kind config, so the mapping is fixed
// before the nodes exist), and once the nodes are Ready each is shaped by package
// nodeshape as that instance type: its instance-type label, the Neuron or GPU
// taint, and the catalog's Neuron devices, GPUs and EFA interfaces as capacity
// and allocatable. Pods then schedule as they would on EKS; the devices are
// counted, not real. Up also installs the pinned JobSet and Argo Workflows
// releases (Components) from manifests embedded in the package.
//
// The container engine is found as the kind command finds it: the one
// KIND_EXPERIMENTAL_PROVIDER names, else the first of docker, nerdctl and podman
// that answers.
package kind

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/kind/pkg/cluster"

	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/provision/nodeshape"
	"github.com/manifoldflow/manifold/runtimes/display"
)

// DefaultTimeout bounds each wait of Up: for the nodes to be Ready, and for each
// component's Deployments to be Available (their images are pulled then).
const DefaultTimeout = 5 * time.Minute

// Options configure Up.
type Options struct {
	// Name is the cluster's name; "" is DefaultName.
	Name string
	// Simulate are the workers to shape as instance types; none makes one plain
	// worker.
	Simulate []Group
	// With are the components to install.
	With []Component
	// Image is the node image (kindest/node:<version>); "" is kind's default.
	Image string
	// Watch keeps the workers' shapes after Up has made them, applying them again
	// whenever a kubelet resets them, until ctx ends.
	Watch bool
	// Timeout bounds each wait; 0 is DefaultTimeout.
	Timeout time.Duration
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// Up creates kind cluster o.Name (or, if it exists with the same simulated
// workers, takes it as it is), waits until its nodes are Ready, shapes the
// simulated workers, and installs o.With. kind adds the cluster to the
// kubeconfig (KUBECONFIG, else ~/.kube/config) as context kind-<name>.
func Up(ctx context.Context, o Options) error {
	name := cmp.Or(o.Name, DefaultName)
	if err := CheckName(name); err != nil {
		return err
	}
	log := newLogger(o.Log)
	provider, eng, err := newProvider(ctx, log)
	if err != nil {
		return err
	}
	clusters, err := provider.List()
	if err != nil {
		return engineErr(fmt.Sprintf("list the kind clusters of %s", eng.binary), err)
	}
	exists := slices.Contains(clusters, name)
	timeout := cmp.Or(o.Timeout, DefaultTimeout)
	if exists {
		log.printf("kind cluster %s exists; checking its workers and shaping them again", name)
	} else {
		log.printf("creating kind cluster %s with %s: %s", name, eng.binary, describe(o.Simulate))
		if err := create(ctx, provider, name, Config(name, o.Simulate, o.Image), timeout); err != nil {
			return err
		}
	}
	kubeconfig, err := provider.KubeConfig(name, false)
	if err != nil {
		return engineErr(fmt.Sprintf("read the kubeconfig of kind cluster %s", name), err)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
	if err != nil {
		return fmt.Errorf("kubeconfig of kind cluster %s: %w", name, err)
	}
	cl, err := connect(rc)
	if err != nil {
		return err
	}
	if exists {
		recorded, err := recordedTypes(ctx, cl.client.CoreV1().Nodes())
		if err != nil {
			return fmt.Errorf("read the workers of kind cluster %s: %w", name, err)
		}
		if !sameWorkers(recorded, o.Simulate) {
			return fmt.Errorf("kind cluster %s exists with other simulated workers (%s); remove it with kind down%s, or give the same --simulate",
				name, describeOr(groupsOf(recorded), "none"), nameFlag(name))
		}
	}
	// A new cluster must have all its nodes; one that exists has the nodes it has.
	nodes := 1
	if !exists {
		nodes = 1 + max(len(workerTypes(o.Simulate)), 1)
	}
	return settle(ctx, cl, name, o, nodes, timeout, log)
}

// create has kind create the cluster of cfg and wait for its control plane. kind
// cannot be stopped midway: when ctx ends first, create returns at once and
// says how to remove what kind made.
func create(ctx context.Context, provider *cluster.Provider, name string, cfg *v1alpha4.Cluster, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		done <- provider.Create(name,
			cluster.CreateWithV1Alpha4Config(cfg),
			cluster.CreateWithWaitForReady(timeout),
			cluster.CreateWithDisplayUsage(false),
			cluster.CreateWithDisplaySalutation(false))
	}()
	select {
	case err := <-done:
		if err != nil {
			return engineErr(fmt.Sprintf("create kind cluster %s", name), err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("interrupted while kind was creating cluster %s; remove what it made with kind down%s", name, nameFlag(name))
	}
}

// clients reach a cluster.
type clients struct {
	client *kubeclient.Clientset
	dyn    dynamic.Interface
	mapper *kubeclient.Mapper
}

func connect(rc *rest.Config) (*clients, error) {
	c, err := kubeclient.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	dyn, err := kubeclient.NewDynamic(rc)
	if err != nil {
		return nil, err
	}
	return &clients{client: c, dyn: dyn, mapper: kubeclient.NewMapper(c)}, nil
}

// settle finishes what Up does once the cluster exists: waits until there are
// at least nodes nodes, all Ready, shapes the simulated workers, makes the
// control plane take general pods if every worker is tainted, installs the
// components, and with o.Watch keeps the shapes until ctx ends.
func settle(ctx context.Context, cl *clients, name string, o Options, nodes int, timeout time.Duration, log *logger) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err := waitNodes(wctx, cl.client.CoreV1().Nodes(), nodes)
	cancel()
	if err != nil {
		return fmt.Errorf("kind cluster %s: %w", name, err)
	}
	shapes, err := shapeWorkers(ctx, cl.client.CoreV1().Nodes())
	if err != nil {
		return err
	}
	for _, node := range slices.Sorted(maps.Keys(shapes)) {
		log.printf("%s: %s", node, shapes[node])
	}
	if len(shapes) > 0 && !slices.ContainsFunc(slices.Collect(maps.Values(shapes)), func(s nodeshape.Shape) bool { return len(s.Taints) == 0 }) {
		changed, err := untaintControlPlane(ctx, cl.client.CoreV1().Nodes())
		if err != nil {
			return err
		}
		for _, n := range changed {
			log.printf("%s: takes the pods that tolerate no accelerator taint (its control-plane taint is removed)", n)
		}
	}
	for _, comp := range o.With {
		log.printf("installing %s %s (%s)", comp.Title, comp.Version, comp.Source)
		if err := install(ctx, cl.client, cl.dyn, cl.mapper, comp, timeout); err != nil {
			return err
		}
		log.printf("%s %s is running", comp.Title, comp.Version)
	}
	log.printf("kind cluster %s is ready: kubeconfig context kind-%s", name, name)
	if !o.Watch || len(shapes) == 0 {
		return nil
	}
	log.printf("keeping the simulated capacity of %s until interrupted", display.Count(len(shapes), "worker"))
	return nodeshape.Keep(ctx, cl.client.CoreV1().Nodes(), shapes, func(node string, err error) {
		if err != nil {
			log.printf("%s: could not apply %s again: %v", node, shapes[node].InstanceType, err)
			return
		}
		log.printf("%s: its shape was reset; applied %s again", node, shapes[node].InstanceType)
	})
}

// describe says what nodes groups make: "1 control-plane node and 3 workers:
// 2 × trn1.32xlarge, 1 × inf2.xlarge".
func describe(groups []Group) string {
	n := len(workerTypes(groups))
	if n == 0 {
		return "1 control-plane node and 1 worker"
	}
	noun := "workers"
	if n == 1 {
		noun = "worker"
	}
	return fmt.Sprintf("1 control-plane node and %d %s: %s", n, noun, describeOr(groups, ""))
}

func describeOr(groups []Group, none string) string {
	if len(groups) == 0 {
		return none
	}
	items := make([]string, len(groups))
	for i, g := range groups {
		items[i] = fmt.Sprintf("%d × %s", g.Count, g.InstanceType)
	}
	return strings.Join(items, ", ")
}

// nameFlag is the --name flag that names cluster name in a command, "" for the
// default name.
func nameFlag(name string) string {
	if name == DefaultName {
		return ""
	}
	return " --name " + name
}
