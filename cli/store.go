package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/manifoldflow/manifold/artifact"
	"github.com/manifoldflow/manifold/client"
	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
)

// stepStore opens the artifact store of the step command from the environment
// every target gives a step's container: with an artifact store,
// MANIFOLD_ARTIFACT_STORE and MANIFOLD_RUN_ID, the run's artifacts being under
// <store>/<flow>/<run id>; else MANIFOLD_RUN_DIR (what the local runtime sets),
// else, in a pod (a container the kubelet started), noStore, and off a
// cluster DefaultRunDir. A location is a directory, or an s3:// URL (whose S3
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
	if dir == "" && os.Getenv(envServiceHost) != "" {
		return noStore{}, nil
	}
	if dir == "" {
		dir = DefaultRunDir
	}
	return openStore(ctx, dir)
}

// envServiceHost is the API server's address, which the kubelet gives every
// container it starts, with or without service links, and which client-go's
// in-cluster config reads: a step process that has it runs in a pod.
const envServiceHost = "KUBERNETES_SERVICE_HOST"

// noStore is the store of a step in a pod of a flow compiled without an
// artifact store: every Put and Get fails at once, saying how to give the flow
// one, rather than write to the pod's own disk, which no other step's pod sees,
// or look there for what another step put.
type noStore struct{}

func (noStore) Put(context.Context, string, []byte) error { return errNoStore }

func (noStore) Get(context.Context, string) ([]byte, error) { return nil, errNoStore }

// Location is "": the pod has no place that another step's pod reaches
// (ctx.ArtifactDir returns "").
func (noStore) Location(string) string { return "" }

var errNoStore = errors.New("this pod has no artifact store (no " + plan.EnvArtifactStore + "), and what a step keeps on its pod's own disk no other step finds; " +
	compile.NoStoreAdvice + "; then compile or deploy it again (" + plan.EnvRunDir + "=DIR keeps a step's artifacts in DIR)")

// openStore opens the store at location: an s3:// URL (whose S3 endpoint
// MANIFOLD_S3_ENDPOINT may override) or a directory.
func openStore(ctx context.Context, location string) (artifact.Store, error) {
	return client.OpenStore(ctx, location, os.Getenv(plan.EnvS3Endpoint))
}
