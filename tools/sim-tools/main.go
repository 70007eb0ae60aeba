// Command sim-tools builds the programs of the simulated cluster (etcd, the
// Kubernetes control plane, kwok, the JobSet, Argo and Kueue controllers) into their
// versioned cache directory, building only those missing. Run it from the
// repository root, as `make sim-tools` does.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/manifoldflow/manifold/harness/simcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := simcluster.BinDir()
	if err == nil {
		start := time.Now()
		toolsDir := filepath.Join("tools", "simcluster")
		err = simcluster.BuildTools(ctx, "go", toolsDir, dir, os.Stderr)
		fmt.Fprintf(os.Stderr, "simulated cluster tools in %s (%s)\n", dir, time.Since(start).Round(time.Second))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim-tools:", err)
		os.Exit(1)
	}
}
