// Package kubeclient is a typed client of the few Kubernetes APIs Manifold
// reads and writes, made of client-go's generic typed clients (gentype) over
// REST clients whose scheme holds those APIs alone.
//
// client-go's Clientset (k8s.io/client-go/kubernetes) registers every API
// group Kubernetes serves in its scheme when the program starts: about 3 ms
// and 5,700 allocations at every start of a program that links it, which for
// a flow program is every command and every local step. This package
// registers its groups the first time a Clientset is made. Its clients have
// the methods and signatures of client-go's typed clients
// (`CoreV1().Pods(ns).List(ctx, opts)`), so a function that takes a small
// interface of them works with either.
package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/manifoldflow/manifold/internal/credential"
)

// codecs are the scheme of the package's API groups, its codec factory and
// parameter codec, made once, the first time a Clientset is.
var codecs = sync.OnceValue(func() *schemeCodecs {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, batchv1.AddToScheme, appsv1.AddToScheme, authorizationv1.AddToScheme,
		schedulingv1.AddToScheme, resourcev1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return &schemeCodecs{scheme: s, factory: serializer.NewCodecFactory(s), params: runtime.NewParameterCodec(s)}
})

type schemeCodecs struct {
	scheme  *runtime.Scheme
	factory serializer.CodecFactory
	params  runtime.ParameterCodec
}

// Scheme returns the scheme of the API groups the package's clients use.
func Scheme() *runtime.Scheme { return codecs().scheme }

// HTTPClientFor is rest.HTTPClientFor(c), following no redirect to another
// origin than the API server's (credential.CheckRedirect): client-go's
// transport sets the kubeconfig's token on every request it sends, a
// redirected one too, wherever it goes. Every client of this package, and the
// dynamic one (NewDynamic), is made over it.
func HTTPClientFor(c *rest.Config) (*http.Client, error) {
	hc, err := rest.HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	hc.CheckRedirect = credential.CheckRedirect
	return hc, nil
}

// NewDynamic makes client-go's dynamic client from c, over HTTPClientFor.
func NewDynamic(c *rest.Config) (*dynamic.DynamicClient, error) {
	hc, err := HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfigAndClient(c, hc)
}

// Clientset is a client of the core, batch, apps, authorization, scheduling
// and resource (DRA) API groups, and of the API server's version and
// discovery.
type Clientset struct {
	core, batch, apps, authorization, scheduling, resource *rest.RESTClient
}

// NewForConfig makes a Clientset from c, as kubernetes.NewForConfig makes
// client-go's: one HTTP client shared by the API groups, each with its own
// REST client.
func NewForConfig(c *rest.Config) (*Clientset, error) {
	hc, err := HTTPClientFor(c)
	if err != nil {
		return nil, err
	}
	cc := codecs()
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		config := rest.CopyConfig(c)
		config.GroupVersion = &gv
		config.APIPath = apiPath
		config.NegotiatedSerializer = rest.CodecFactoryForGeneratedClient(cc.scheme, cc.factory).WithoutConversion()
		if config.UserAgent == "" {
			config.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientForConfigAndClient(config, hc)
	}
	var cs Clientset
	for _, g := range []struct {
		client **rest.RESTClient
		gv     schema.GroupVersion
		path   string
	}{
		{&cs.core, corev1.SchemeGroupVersion, "/api"},
		{&cs.batch, batchv1.SchemeGroupVersion, "/apis"},
		{&cs.apps, appsv1.SchemeGroupVersion, "/apis"},
		{&cs.authorization, authorizationv1.SchemeGroupVersion, "/apis"},
		{&cs.scheduling, schedulingv1.SchemeGroupVersion, "/apis"},
		{&cs.resource, resourcev1.SchemeGroupVersion, "/apis"},
	} {
		if *g.client, err = group(g.gv, g.path); err != nil {
			return nil, err
		}
	}
	return &cs, nil
}

// RESTClient returns the REST client of the core API group, for requests by
// path (AbsPath).
func (c *Clientset) RESTClient() rest.Interface { return c.core }

// ServerVersion returns the API server's version (GET /version).
func (c *Clientset) ServerVersion(ctx context.Context) (*version.Info, error) {
	body, err := c.core.Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var info version.Info
	if err := json.Unmarshal(body, &info); err != nil {
		return nil, fmt.Errorf("the API server's version: %w", err)
	}
	return &info, nil
}

// ServerResourcesForGroupVersion returns the resources the API server serves
// in group version gv ("v1", "batch/v1"); an error that apierrors.IsNotFound
// tells when it serves none.
func (c *Clientset) ServerResourcesForGroupVersion(ctx context.Context, gv string) (*metav1.APIResourceList, error) {
	path := "/apis/" + gv
	if gv == "v1" {
		path = "/api/v1"
	}
	body, err := c.core.Get().AbsPath(path).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("the API server's resources of %s: %w", gv, err)
	}
	if list.GroupVersion == "" {
		list.GroupVersion = gv
	}
	return &list, nil
}

// client is a typed client of one resource, namespaced when ns is not "".
func client[T interface {
	runtime.Object
	metav1.Object
}, L runtime.Object](rc rest.Interface, resource, ns string, newT func() T, newL func() L) *gentype.ClientWithList[T, L] {
	return gentype.NewClientWithList[T, L](resource, rc, codecs().params, ns, newT, newL, gentype.PrefersProtobuf[T]())
}

// CoreV1 is the core API group's client.
type CoreV1 struct{ rc rest.Interface }

// CoreV1 returns the core API group's client.
func (c *Clientset) CoreV1() CoreV1 { return CoreV1{c.core} }

// Pods is a client of the pods of a namespace.
type Pods struct {
	*gentype.ClientWithList[*corev1.Pod, *corev1.PodList]
}

// Pods returns a client of the pods of namespace ns.
func (c CoreV1) Pods(ns string) Pods {
	return Pods{client(c.rc, "pods", ns, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })}
}

// GetLogs returns the request for the log of pod name, as opts choose it.
func (p Pods) GetLogs(name string, opts *corev1.PodLogOptions) *rest.Request {
	return p.GetClient().Get().Namespace(p.GetNamespace()).Name(name).Resource("pods").SubResource("log").VersionedParams(opts, codecs().params)
}

// Nodes returns a client of the cluster's nodes.
func (c CoreV1) Nodes() *gentype.ClientWithList[*corev1.Node, *corev1.NodeList] {
	return client(c.rc, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

// Namespaces returns a client of the cluster's namespaces.
func (c CoreV1) Namespaces() *gentype.ClientWithList[*corev1.Namespace, *corev1.NamespaceList] {
	return client(c.rc, "namespaces", "", func() *corev1.Namespace { return &corev1.Namespace{} }, func() *corev1.NamespaceList { return &corev1.NamespaceList{} })
}

// Events returns a client of the events of namespace ns.
func (c CoreV1) Events(ns string) *gentype.ClientWithList[*corev1.Event, *corev1.EventList] {
	return client(c.rc, "events", ns, func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

// Services returns a client of the services of namespace ns.
func (c CoreV1) Services(ns string) *gentype.ClientWithList[*corev1.Service, *corev1.ServiceList] {
	return client(c.rc, "services", ns, func() *corev1.Service { return &corev1.Service{} }, func() *corev1.ServiceList { return &corev1.ServiceList{} })
}

// PersistentVolumeClaims returns a client of the claims of namespace ns.
func (c CoreV1) PersistentVolumeClaims(ns string) *gentype.ClientWithList[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList] {
	return client(c.rc, "persistentvolumeclaims", ns, func() *corev1.PersistentVolumeClaim { return &corev1.PersistentVolumeClaim{} }, func() *corev1.PersistentVolumeClaimList { return &corev1.PersistentVolumeClaimList{} })
}

// LimitRanges returns a client of the limit ranges of namespace ns.
func (c CoreV1) LimitRanges(ns string) *gentype.ClientWithList[*corev1.LimitRange, *corev1.LimitRangeList] {
	return client(c.rc, "limitranges", ns, func() *corev1.LimitRange { return &corev1.LimitRange{} }, func() *corev1.LimitRangeList { return &corev1.LimitRangeList{} })
}

// BatchV1 is the batch API group's client.
type BatchV1 struct{ rc rest.Interface }

// BatchV1 returns the batch API group's client.
func (c *Clientset) BatchV1() BatchV1 { return BatchV1{c.batch} }

// Jobs returns a client of the Jobs of namespace ns.
func (c BatchV1) Jobs(ns string) *gentype.ClientWithList[*batchv1.Job, *batchv1.JobList] {
	return client(c.rc, "jobs", ns, func() *batchv1.Job { return &batchv1.Job{} }, func() *batchv1.JobList { return &batchv1.JobList{} })
}

// AppsV1 is the apps API group's client.
type AppsV1 struct{ rc rest.Interface }

// AppsV1 returns the apps API group's client.
func (c *Clientset) AppsV1() AppsV1 { return AppsV1{c.apps} }

// Deployments returns a client of the Deployments of namespace ns.
func (c AppsV1) Deployments(ns string) *gentype.ClientWithList[*appsv1.Deployment, *appsv1.DeploymentList] {
	return client(c.rc, "deployments", ns, func() *appsv1.Deployment { return &appsv1.Deployment{} }, func() *appsv1.DeploymentList { return &appsv1.DeploymentList{} })
}

// AuthorizationV1 is the authorization API group's client.
type AuthorizationV1 struct{ rc rest.Interface }

// AuthorizationV1 returns the authorization API group's client.
func (c *Clientset) AuthorizationV1() AuthorizationV1 { return AuthorizationV1{c.authorization} }

// SelfSubjectAccessReviews returns a client of access reviews of this user
// (Create asks one).
func (c AuthorizationV1) SelfSubjectAccessReviews() *gentype.Client[*authorizationv1.SelfSubjectAccessReview] {
	return gentype.NewClient[*authorizationv1.SelfSubjectAccessReview]("selfsubjectaccessreviews", c.rc, codecs().params, "",
		func() *authorizationv1.SelfSubjectAccessReview { return &authorizationv1.SelfSubjectAccessReview{} },
		gentype.PrefersProtobuf[*authorizationv1.SelfSubjectAccessReview]())
}

// SchedulingV1 is the scheduling API group's client.
type SchedulingV1 struct{ rc rest.Interface }

// SchedulingV1 returns the scheduling API group's client.
func (c *Clientset) SchedulingV1() SchedulingV1 { return SchedulingV1{c.scheduling} }

// PriorityClasses returns a client of the cluster's priority classes.
func (c SchedulingV1) PriorityClasses() *gentype.ClientWithList[*schedulingv1.PriorityClass, *schedulingv1.PriorityClassList] {
	return client(c.rc, "priorityclasses", "", func() *schedulingv1.PriorityClass { return &schedulingv1.PriorityClass{} }, func() *schedulingv1.PriorityClassList { return &schedulingv1.PriorityClassList{} })
}

// ResourceV1 is the resource (DRA) API group's client.
type ResourceV1 struct{ rc rest.Interface }

// ResourceV1 returns the resource (DRA) API group's client.
func (c *Clientset) ResourceV1() ResourceV1 { return ResourceV1{c.resource} }

// DeviceClasses returns a client of the cluster's device classes.
func (c ResourceV1) DeviceClasses() *gentype.ClientWithList[*resourcev1.DeviceClass, *resourcev1.DeviceClassList] {
	return client(c.rc, "deviceclasses", "", func() *resourcev1.DeviceClass { return &resourcev1.DeviceClass{} }, func() *resourcev1.DeviceClassList { return &resourcev1.DeviceClassList{} })
}

// ResourceSlices returns a client of the cluster's resource slices.
func (c ResourceV1) ResourceSlices() *gentype.ClientWithList[*resourcev1.ResourceSlice, *resourcev1.ResourceSliceList] {
	return client(c.rc, "resourceslices", "", func() *resourcev1.ResourceSlice { return &resourcev1.ResourceSlice{} }, func() *resourcev1.ResourceSliceList { return &resourcev1.ResourceSliceList{} })
}

// ResourceClaimTemplates returns a client of the claim templates of
// namespace ns.
func (c ResourceV1) ResourceClaimTemplates(ns string) *gentype.ClientWithList[*resourcev1.ResourceClaimTemplate, *resourcev1.ResourceClaimTemplateList] {
	return client(c.rc, "resourceclaimtemplates", ns, func() *resourcev1.ResourceClaimTemplate { return &resourcev1.ResourceClaimTemplate{} }, func() *resourcev1.ResourceClaimTemplateList { return &resourcev1.ResourceClaimTemplateList{} })
}

// ListWatcher lists and watches one resource, as the clients above do.
type ListWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// Informer returns a shared informer of what c lists and watches, of objects
// like example, indexed by namespace and with tweak (when not nil) applied to
// the options of every list and watch: the informer client-go's informer
// factories make (informers.NewSharedInformerFactoryWithOptions with
// WithTweakListOptions), without a resync. Its indexer serves the listers of
// k8s.io/client-go/listers (corev1listers.NewPodLister(inf.GetIndexer())).
func Informer[L runtime.Object](c ListWatcher[L], example runtime.Object, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(ListWatch(c, tweak), c), example, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// ListWatch lists and watches through c, with tweak (when not nil) applied
// to the options of every list and watch: what an informer or
// watchtools.UntilWithSync reads.
func ListWatch[L runtime.Object](c ListWatcher[L], tweak func(*metav1.ListOptions)) *cache.ListWatch {
	tweaked := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, tweaked(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, tweaked(o))
		},
	}
}
