// Command sim starts the simulated AWS cluster and keeps it running until
// interrupted, printing the path of its kubeconfig:
//
//	make sim
//	kubectl --kubeconfig PATH get nodes
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/manifoldflow/manifold/harness/simcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start, cancel := context.WithTimeout(ctx, simcluster.StartTimeout)
	c, err := simcluster.Start(start, simcluster.Options{KeepDir: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim:", err)
		os.Exit(1)
	}
	fmt.Printf("simulated cluster running; nodes: %v\n", c.Nodes)
	fmt.Printf("kubeconfig: %s\nlogs: %s/logs\n", c.Kubeconfig, c.Dir)
	fmt.Println("press Ctrl-C to stop it")
	<-ctx.Done()
	c.Stop()
	fmt.Println("stopped; state kept in", c.Dir)
}
