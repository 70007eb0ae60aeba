package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
)

// stepStore opens the artifact store of the step command from the environment
// every target gives a step's container: with an artifact store,
// MANIFOLD_ARTIFACT_STORE and MANIFOLD_RUN_ID, the run's artifacts being under
// <store>/<flow>/<run id>; else MANIFOLD_RUN_DIR (what the local runtime sets),
// else DefaultRunDir. A location is a directory, or an s3:// URL (whose S3
// endpoint MANIFOLD_S3_ENDPOINT may override).
func stepStore(ctx context.Context, flow string) (artifact.Store, error) {
	if root := os.Getenv(plan.EnvArtifactStore); root != "" {
		run := os.Getenv(plan.EnvRunID)
		if err := runid.CheckStore(run); err != nil {
			return nil, fmt.Errorf("%s=%q: %v; every pod of a flow with an artifact store gets the run's ID, so set it when you run `step` by hand", plan.EnvRunID, run, err)
		}
		if !strings.HasPrefix(root, "s3://") {
			info, err := os.Stat(root)
			if err != nil || !info.IsDir() {
				return nil, fmt.Errorf("%s=%s: no such directory; the flow's artifact volume is mounted there in every pod: is this the step's container?", plan.EnvArtifactStore, root)
			}
		}
		return openStore(ctx, artifact.RunLocation(root, flow, run))
	}
	dir := os.Getenv(EnvRunDir)
	if dir == "" {
		dir = DefaultRunDir
	}
	return openStore(ctx, dir)
}

// openStore opens the store at location: an s3:// URL (whose S3 endpoint
// MANIFOLD_S3_ENDPOINT may override) or a directory.
func openStore(ctx context.Context, location string) (artifact.Store, error) {
	return client.OpenStore(ctx, location, os.Getenv(plan.EnvS3Endpoint))
}
