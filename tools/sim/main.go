// Command sim starts the simulated AWS cluster and keeps it running until
// interrupted, printing the path of its kubeconfig:
//
//	make sim
//	kubectl --kubeconfig PATH get nodes
//
// With -real-nodes N (make sim REAL_NODES=N) it also starts N real nodes, which
// run pods in real containers (as root, with containerd, runc and the CNI
// plugins installed), and prints the loopback registry their images come from.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/manifoldflow/manifold/harness/simcluster"
)

func main() {
	realNodes := flag.Int("real-nodes", 0, "also start `N` real nodes")
	realType := flag.String("real-type", simcluster.CPUInstanceType, "the instance type the real nodes are shaped as")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start, cancel := context.WithTimeout(ctx, simcluster.StartTimeout)
	c, err := simcluster.Start(start, simcluster.Options{KeepDir: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim:", err)
		os.Exit(1)
	}
	for range *realNodes {
		n, err := c.StartNode(ctx, simcluster.NodeOptions{InstanceType: *realType})
		if err != nil {
			c.Stop()
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(1)
		}
		fmt.Printf("real node %s (pods tolerating %s run there)\n", n.Name, simcluster.LabelRealNode)
	}
	if *realNodes > 0 {
		reg, err := c.Registry(ctx)
		if err != nil {
			c.Stop()
			fmt.Fprintln(os.Stderr, "sim:", err)
			os.Exit(1)
		}
		fmt.Printf("images: push to %s (docker.io/library/busybox:1.37 is %s/library/busybox:1.37)\n", reg.Host, reg.Host)
	}
	fmt.Printf("simulated cluster running; nodes: %v\n", c.Nodes)
	fmt.Printf("kubeconfig: %s\nlogs: %s/logs\n", c.Kubeconfig, c.Dir)
	fmt.Println("press Ctrl-C to stop it")
	<-ctx.Done()
	c.Stop()
	fmt.Println("stopped; state kept in", c.Dir)
}
