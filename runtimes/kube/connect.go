package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/internal/kubeclient"
)

// Kinds the runtime creates, with their resources.
var (
	jobGVR     = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
	serviceGVR = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	jobSetGVR  = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
)

// cluster is a connection to the API server of the cluster a run uses.
type cluster struct {
	config  *rest.Config
	client  *kubeclient.Clientset
	dynamic dynamic.Interface
	// context is the kubeconfig context used, host the API server's URL, and
	// namespace the one objects without their own go to.
	context, host, namespace string
	// kueue is whether the cluster serves Kueue's API, once asked (kueueServed).
	kueue *bool
	// reach follows whether the API server answers, once the run follows it
	// (follow); nil before.
	reach *reach
}

// follow makes the clients anew so that every request of the run goes past a
// reach (which follows whether the API server answers) with the outage limit
// limit.
func (c *cluster) follow(limit time.Duration) error {
	probe, err := readyz(c.config)
	if err != nil {
		return err
	}
	r := newReach(c.host, limit, probe)
	rc := rest.CopyConfig(c.config)
	rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &transport{r: r, next: rt} })
	client, err := kubeclient.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := kubeclient.NewDynamic(rc)
	if err != nil {
		return err
	}
	c.config, c.client, c.dynamic, c.reach = rc, client, dyn, r
	return nil
}

// retry makes the request f, again while the API server does not answer
// (reach.retry), or once if the run does not follow it.
func (c *cluster) retry(ctx context.Context, f func(context.Context) error) error {
	if c.reach == nil {
		return f(ctx)
	}
	return c.reach.retry(ctx, f)
}

// connectTimeout bounds the first request to the cluster, which tells whether it
// can be reached at all.
const connectTimeout = 15 * time.Second

// connect resolves the kubeconfig as kubectl does (the explicit path, else
// KUBECONFIG, else ~/.kube/config; the context given or the current one) and
// checks that the cluster answers.
func connect(ctx context.Context, o Options) (*cluster, error) {
	cc, name, err := kubeconfigContext(o.Kubeconfig, o.Context)
	if err != nil {
		return nil, err
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %s: %w", name, err)
	}
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = cmp.Or(o.QPS, DefaultQPS), cmp.Or(o.Burst, DefaultBurst)
	if o.Requests != nil {
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return counting{rt, o.Requests} })
	}
	// host is what every message, report and record names the cluster by: the
	// server URL with a password in it withheld.
	c := &cluster{config: rc, context: name, host: credential.Redact("", rc.Host)}
	if c.namespace = o.Namespace; c.namespace == "" {
		if c.namespace, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("kubeconfig context %s: %w", name, err)
		}
	}
	if c.client, err = kubeclient.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.dynamic, err = kubeclient.NewDynamic(rc); err != nil {
		return nil, err
	}

	probe := rest.CopyConfig(rc)
	probe.Timeout = connectTimeout
	pc, err := kubeclient.NewForConfig(probe)
	if err != nil {
		return nil, err
	}
	if _, err := pc.ServerVersion(context.Background()); err != nil {
		switch {
		case apierrors.IsUnauthorized(err):
			return nil, fmt.Errorf("the cluster at %s (context %s) refused the credentials: %v; log in again or fix the kubeconfig's user", c.host, name, err)
		case apierrors.IsForbidden(err):
			// Some clusters forbid /version to some users; the checks below say
			// what matters.
		default:
			return nil, fmt.Errorf("cannot reach the cluster at %s (context %s): %v; is it running? (`kubectl cluster-info` checks it; `kind up` starts a laptop cluster)", c.host, name, err)
		}
	}
	return c, nil
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
		if err := c.served(jobSetGVR, "install the JobSet controller (`kind up --with jobset`, or https://jobset.sigs.k8s.io/docs/installation/), or run with --as job"); err != nil {
			return nil, err
		}
	}
	for _, ns := range namespaces {
		_, err := c.client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("namespace %s does not exist on the cluster at %s: create it (`kubectl create namespace %s`) or pass --namespace", ns, c.host, ns)
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
			c.host, c.context, strings.Join(lines, "\n"))
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
	got, err := c.client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the cluster at %s what this user may do: %w", c.host, err)
	}
	return got.Status.Allowed, nil
}

// served checks that the API server serves resource gvr, saying what to do when it
// does not.
func (c *cluster) served(gvr schema.GroupVersionResource, todo string) error {
	ok, err := c.serves(gvr)
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("the cluster at %s does not serve %s (%s): %s", c.host, gvr.Resource, gvr.GroupVersion(), todo)
}

// serves reports whether the API server serves resource gvr.
func (c *cluster) serves(gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.client.ServerResourcesForGroupVersion(context.Background(), gvr.GroupVersion().String())
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("asking the cluster at %s for the %s API: %w", c.host, gvr.GroupVersion(), err)
	}
	if list != nil {
		for _, r := range list.APIResources {
			if r.Name == gvr.Resource {
				return true, nil
			}
		}
	}
	return false, nil
}

// claim is a PersistentVolumeClaim a step mounts, in the namespace of its pods.
type claim struct {
	ns, name, step string
}

// claimsExist checks that every claim the steps mount exists: a pod whose claim
// does not exist waits for it for ever.
func (c *cluster) claimsExist(ctx context.Context, claims []claim) error {
	for _, cl := range claims {
		_, err := c.client.CoreV1().PersistentVolumeClaims(cl.ns).Get(ctx, cl.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("step %s mounts the PersistentVolumeClaim %s, which does not exist in namespace %s on the cluster at %s: create it, or run in the namespace that has it (--namespace)", cl.step, cl.name, cl.ns, c.host)
		case apierrors.IsForbidden(err):
			// Not allowed to look: the pods will say if it is missing.
		case err != nil:
			return fmt.Errorf("PersistentVolumeClaim %s of step %s: %w", cl.name, cl.step, err)
		}
	}
	return nil
}

// ContextName returns the kubeconfig context a run with kubeconfig and context
// uses, resolved as kubectl resolves it (context, else the current one), or says
// what is missing.
func ContextName(kubeconfig, context string) (string, error) {
	_, name, err := kubeconfigContext(kubeconfig, context)
	return name, err
}

// kubeconfigContext loads the kubeconfig as kubectl does (the explicit path, else
// KUBECONFIG, else ~/.kube/config) and picks the context (context, else the
// current one), saying what to do when there is none.
func kubeconfigContext(kubeconfig, context string) (clientcmd.ClientConfig, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	name := context
	if name == "" {
		name = raw.CurrentContext
	}
	if len(raw.Contexts) == 0 {
		return nil, "", errors.New("no kubeconfig with a cluster was found: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config (`kind up` makes one for a laptop cluster)")
	}
	if _, ok := raw.Contexts[name]; !ok {
		var names []string
		for n := range raw.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
		if name == "" {
			return nil, "", fmt.Errorf("the kubeconfig sets no current context: pass --context, one of %s", strings.Join(names, ", "))
		}
		return nil, "", fmt.Errorf("the kubeconfig has no context %q: pass --context with one of %s", name, strings.Join(names, ", "))
	}
	return cc, name, nil
}
