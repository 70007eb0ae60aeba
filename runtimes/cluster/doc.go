// Package cluster holds what the runtimes that drive a Kubernetes cluster share
// (package runtimes/kube, which runs a flow's steps as Jobs or JobSets, and
// package runtimes/argo, which follows Argo's Workflows): the connection to
// the API server (Connect, Conn; the kubeconfig resolved as kubectl resolves
// it), which outlives an API server that stops answering for a while once the
// run follows it (Conn.Follow, Conn.Retry); what a failed pod is told by
// (PodFailure); and the following of the pods' logs (LogFollower, StreamLog),
// to the run's display and record.
package cluster
