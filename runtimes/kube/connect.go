package kube

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	rcluster "github.com/manifoldflow/manifold/runtimes/cluster"
)

// Kinds the runtime creates, with their resources.
var (
	jobGVR     = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	serviceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	jobSetGVR  = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
)

// cluster is the connection to the API server of the cluster a run uses, with
// what the runner asks of it.
type cluster struct {
	*rcluster.Conn
	// kueue is whether the cluster serves Kueue's API, once asked (kueueServed).
	kueue *bool
}

// connect connects to the cluster o names (rcluster.Connect), counting the
// requests in o.Requests when it is set.
func connect(ctx context.Context, o Options) (*cluster, error) {
	co := rcluster.Options{Kubeconfig: o.Kubeconfig, Context: o.Context, Namespace: o.Namespace, QPS: o.QPS, Burst: o.Burst}
	if o.Requests != nil {
		co.Wrap = func(rt http.RoundTripper) http.RoundTripper { return counting{rt, o.Requests} }
	}
	conn, err := rcluster.Connect(ctx, co)
	if err != nil {
		return nil, err
	}
	return &cluster{Conn: conn}, nil
}

// access is one verb on one resource, as an access review asks it.
type access struct {
	verb, group, resource, subresource string
}

// preflight checks, before anything is created, that every namespace the run uses
// exists, that the cluster serves the kinds it will create, and that RBAC lets
// this user do every one of the run's needs (Needs): a need the run cannot do
// without refused is an error naming each verb and resource refused and what
// needs it, one a line; one it can do without is a note.
func (c *cluster) preflight(ctx context.Context, namespaces []string, as string, all []Need) ([]string, error) {
	if as == AsJobSet {
		if err := c.Served(jobSetGVR, "install the JobSet controller (`kind up --with jobset`, or https://jobset.sigs.k8s.io/docs/installation/), or run with --as job"); err != nil {
			return nil, err
		}
	}
	for _, ns := range namespaces {
		_, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("namespace %s does not exist on the cluster at %s: create it (`kubectl create namespace %s`) or pass --namespace", ns, c.Host, ns)
		case apierrors.IsForbidden(err):
			// Getting namespaces is often not allowed (it is a need the run
			// does without); the access reviews below tell whether this one can
			// be used.
		case err != nil:
			return nil, fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	refusals, err := c.refusedNeeds(ctx, namespaces, all)
	if err != nil {
		return nil, err
	}
	var lines, notes []string
	for _, r := range refusals {
		if r.need.Without != "" {
			notes = append(notes, r.note())
		} else {
			lines = append(lines, "  "+r.line())
		}
	}
	if len(lines) > 0 {
		return nil, fmt.Errorf("RBAC on the cluster at %s (context %s) does not let this user do what the run needs; ask a cluster admin for the Role `check --rbac` prints, or use another --namespace or --context:\n%s",
			c.Host, c.Context, strings.Join(lines, "\n"))
	}
	return notes, nil
}

// allowed asks the API server whether this user may do a in namespace ns.
func (c *cluster) allowed(ctx context.Context, ns string, a access) (bool, error) {
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource,
		},
	}}
	got, err := c.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the cluster at %s what this user may do: %w", c.Host, err)
	}
	return got.Status.Allowed, nil
}

// claim is a PersistentVolumeClaim a step mounts, in the namespace of its pods.
type claim struct {
	ns, name, step string
}

// claimsExist checks that every claim the steps mount exists: a pod whose claim
// does not exist waits for it for ever.
func (c *cluster) claimsExist(ctx context.Context, claims []claim) error {
	for _, cl := range claims {
		_, err := c.Client.CoreV1().PersistentVolumeClaims(cl.ns).Get(ctx, cl.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("step %s mounts the PersistentVolumeClaim %s, which does not exist in namespace %s on the cluster at %s: create it, or run in the namespace that has it (--namespace)", cl.step, cl.name, cl.ns, c.Host)
		case apierrors.IsForbidden(err):
			// Not allowed to look: the pods will say if it is missing.
		case err != nil:
			return fmt.Errorf("PersistentVolumeClaim %s of step %s: %w", cl.name, cl.step, err)
		}
	}
	return nil
}
