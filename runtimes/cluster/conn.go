package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manifoldflow/manifold/internal/credential"
	"github.com/manifoldflow/manifold/internal/kubeclient"
)

// DefaultQPS and DefaultBurst limit the requests a run or check makes to the
// API server: client-go's token bucket, DefaultQPS requests a second on
// average with bursts of DefaultBurst. The runner watches rather than polls,
// so these bound the creation and deletion of a wide fan-out; they leave room
// for the cluster's own controllers on a shared API server.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

// Options say which cluster to connect to, and how.
type Options struct {
	// Kubeconfig is the kubeconfig file; "" resolves it as kubectl does
	// (KUBECONFIG, then ~/.kube/config).
	Kubeconfig string
	// Context is the kubeconfig context; "" uses its current context.
	Context string
	// Namespace is where objects without a namespace of their own go; "" uses
	// the context's namespace, or "default".
	Namespace string
	// QPS and Burst limit the requests made to the API server (DefaultQPS and
	// DefaultBurst when 0).
	QPS   float32
	Burst int
	// Wrap, when set, wraps the transport of every request made to the API
	// server (as the kube runtime's request count does).
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Conn is a connection to a cluster's API server made as a run makes it: the
// kubeconfig resolved as kubectl does, the request limits of Options.QPS and
// Burst, and the cluster checked to answer. Once the run follows it (Follow),
// it outlives an API server that stops answering for a while. Every runtime
// that drives a cluster (packages runtimes/kube, runtimes/argo) connects with
// it.
type Conn struct {
	Config  *rest.Config
	Client  *kubeclient.Clientset
	Dynamic dynamic.Interface
	// Context is the kubeconfig context used, Host the API server's URL, and
	// Namespace Options.Namespace, else the context's namespace, else "default".
	Context, Host, Namespace string
	// reach follows whether the API server answers, once the run follows it
	// (Follow); nil before.
	reach *reach
}

// connectTimeout bounds the first request to the cluster, which tells whether it
// can be reached at all.
const connectTimeout = 15 * time.Second

// Connect resolves the kubeconfig as kubectl does (the explicit path, else
// KUBECONFIG, else ~/.kube/config; the context given or the current one) and
// checks that the cluster answers, with an error that says what to do when it
// cannot be reached.
func Connect(ctx context.Context, o Options) (*Conn, error) {
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
	if o.Wrap != nil {
		rc.Wrap(o.Wrap)
	}
	// Host is what every message, report and record names the cluster by: the
	// server URL with a password in it withheld.
	c := &Conn{Config: rc, Context: name, Host: credential.Redact("", rc.Host)}
	if c.Namespace = o.Namespace; c.Namespace == "" {
		if c.Namespace, _, err = cc.Namespace(); err != nil {
			return nil, fmt.Errorf("kubeconfig context %s: %w", name, err)
		}
	}
	if c.Client, err = kubeclient.NewForConfig(rc); err != nil {
		return nil, err
	}
	if c.Dynamic, err = kubeclient.NewDynamic(rc); err != nil {
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
			return nil, fmt.Errorf("the cluster at %s (context %s) refused the credentials: %v; log in again or fix the kubeconfig's user", c.Host, name, err)
		case apierrors.IsForbidden(err):
			// Some clusters forbid /version to some users; the checks below say
			// what matters.
		default:
			return nil, fmt.Errorf("cannot reach the cluster at %s (context %s): %v; is it running? (`kubectl cluster-info` checks it; `kind up` starts a laptop cluster)", c.Host, name, err)
		}
	}
	return c, nil
}

// Served checks that the API server serves resource gvr; the error says what to
// do (todo) when it does not.
func (c *Conn) Served(gvr schema.GroupVersionResource, todo string) error {
	ok, err := c.Serves(gvr)
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("the cluster at %s does not serve %s (%s): %s", c.Host, gvr.Resource, gvr.GroupVersion(), todo)
}

// Serves reports whether the API server serves resource gvr.
func (c *Conn) Serves(gvr schema.GroupVersionResource) (bool, error) {
	list, err := c.Client.ServerResourcesForGroupVersion(context.Background(), gvr.GroupVersion().String())
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("asking the cluster at %s for the %s API: %w", c.Host, gvr.GroupVersion(), err)
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

// ContextName returns the kubeconfig context a run with kubeconfig and context
// uses, resolved as kubectl resolves it (context, else the current one), or says
// what is missing.
func ContextName(kubeconfig, context string) (string, error) {
	_, name, err := kubeconfigContext(kubeconfig, context)
	return name, err
}

// ContextNamespace returns the namespace of the kubeconfig context a run with
// kubeconfig and context uses (resolved as ContextName resolves it), the one
// Connect takes when Options.Namespace is "", or says what is missing.
func ContextNamespace(kubeconfig, context string) (string, error) {
	cc, _, err := kubeconfigContext(kubeconfig, context)
	if err != nil {
		return "", err
	}
	ns, _, err := cc.Namespace()
	return ns, err
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
