package cluster

import "context"

// Reachable checks that the cluster of o's kubeconfig and context answers, with
// the one cheap request Connect makes (the API server's version, within
// connectTimeout): an unreachable cluster, or one that refuses the credentials,
// is an error naming the context and the server and what to do. run --kube asks
// it before it builds the flow's image, so that such a run fails in seconds.
func Reachable(ctx context.Context, o Options) error {
	_, err := Connect(ctx, o)
	return err
}
