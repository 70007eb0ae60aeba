// Package simcluster starts a simulated AWS Kubernetes cluster for tests: etcd,
// kube-apiserver, kube-scheduler and kube-controller-manager built from source,
// kwok in place of the kubelet, the JobSet controller with its webhooks and Argo's
// workflow-controller, on loopback ports, with fake nodes shaped like the
// catalog's instance types by package nodeshape (which shapes the workers of
// `kind up --simulate` too). On those fake nodes no containers run: kwok moves
// pods to Running and then to Succeeded (or to Failed for pods labelled
// LabelFail). Real nodes run pods in real containers: StartNode adds one,
// containerd and a kubelet on loopback, whose images come from the cluster's
// Registry; only pods that tolerate LabelRealNode land there. Kueue's controller
// manager is started on demand (StartKueue, KueueNamespace) for the namespaces
// labelled LabelKueue.
//
// The programs are built by `make sim-tools` (BuildTools) from the modules under
// tools/ into a versioned cache directory (BinDir). Tests use Shared with Main in
// TestMain for one cluster per test binary, or Start for a cluster of their own;
// people use `make sim`.
package simcluster
