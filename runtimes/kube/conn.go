package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/plan"
)

// Conn is a connection to a cluster's API server made as a run makes it: the
// kubeconfig resolved as kubectl does, the request limits of Options.QPS and
// Burst, and the cluster checked to answer. Runtimes that drive a cluster through
// another controller (package runtimes/argo) connect with it.
type Conn struct {
	Config  *rest.Config
	Client  *kubeclient.Clientset
	Dynamic dynamic.Interface
	// Context is the kubeconfig context used, Host the API server's URL, and
	// Namespace Options.Namespace, else the context's namespace, else "default".
	Context, Host, Namespace string
	c                        *cluster
}

// Connect connects to the cluster o names (Kubeconfig, Context, Namespace, QPS,
// Burst, Requests), with an error that says what to do when it cannot be reached.
func Connect(ctx context.Context, o Options) (*Conn, error) {
	c, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	return &Conn{Config: c.config, Client: c.client, Dynamic: c.dynamic, Context: c.context, Host: c.host, Namespace: c.namespace, c: c}, nil
}

// Served checks that the API server serves resource gvr; the error says what to
// do (todo) when it does not.
func (c *Conn) Served(gvr schema.GroupVersionResource, todo string) error {
	return c.c.served(gvr, todo)
}

// PodFailure says why pod p of step s failed, as a run names it: the pod, its
// node, its container's reason and exit code (OOMKilled, exit 137), or the pod's
// own reason (Evicted, DeadlineExceeded). It returns the reason alone too, and
// the exit code (nil when no container ended).
func PodFailure(p *corev1.Pod, s *plan.Step) (msg, reason string, code *int) {
	return podFailure(p, s)
}

// PodStarted reports whether p's step container runs or has run, so its log
// can be read.
func PodStarted(p *corev1.Pod) bool { return started(p) }
