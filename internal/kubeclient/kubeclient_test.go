package kubeclient_test

import (
	"context"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/internal/kubeclient"
)

// The tests below, but TestGetLogsRequest, run against the simulated
// cluster's API server, and compare what kubeclient reads with what
// client-go's Clientset (the harness's client) reads.

func TestMain(m *testing.M) { os.Exit(simcluster.Main(m)) }

// newClientset returns a Clientset of the simulated cluster.
func newClientset(t *testing.T) (*kubeclient.Clientset, *simcluster.Cluster) {
	t.Helper()
	sim := simcluster.Shared(t)
	cs, err := kubeclient.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	return cs, sim
}

// TestServerVersion: the version kubeclient reads is the one client-go's
// discovery reads, and names a Kubernetes 1.x release.
func TestServerVersion(t *testing.T) {
	cs, sim := newClientset(t)
	got, err := cs.ServerVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, err := sim.Client.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ServerVersion (-client-go +kubeclient):\n%s", diff)
	}
	if got.Major != "1" || !strings.HasPrefix(got.GitVersion, "v1.") {
		t.Errorf("ServerVersion %+v, want a Kubernetes 1.x release", got)
	}
}

// TestServerResourcesForGroupVersion: the core and batch group versions list
// what client-go's discovery lists, pods namespaced and nodes not; a group
// version the server does not serve is an error that IsNotFound tells.
func TestServerResourcesForGroupVersion(t *testing.T) {
	cs, sim := newClientset(t)
	ctx := context.Background()
	for _, tc := range []struct {
		gv         string
		namespaced []string
		cluster    []string
	}{
		{"v1", []string{"pods", "pods/log", "services", "events"}, []string{"nodes", "nodes/status", "namespaces"}},
		{"batch/v1", []string{"jobs", "jobs/status", "cronjobs"}, nil},
		{"apps/v1", []string{"deployments"}, nil},
	} {
		got, err := cs.ServerResourcesForGroupVersion(ctx, tc.gv)
		if err != nil {
			t.Errorf("%s: %v", tc.gv, err)
			continue
		}
		want, err := sim.Client.Discovery().ServerResourcesForGroupVersion(tc.gv)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-client-go +kubeclient):\n%s", tc.gv, diff)
		}
		if got.GroupVersion != tc.gv {
			t.Errorf("%s: group version %q", tc.gv, got.GroupVersion)
		}
		scope := map[string]bool{}
		for _, r := range got.APIResources {
			scope[r.Name] = r.Namespaced
		}
		for _, names := range []struct {
			list       []string
			namespaced bool
		}{{tc.namespaced, true}, {tc.cluster, false}} {
			for _, name := range names.list {
				if ns, ok := scope[name]; !ok || ns != names.namespaced {
					t.Errorf("%s: resource %s listed %v, namespaced %v; want listed, namespaced %v", tc.gv, name, ok, ns, names.namespaced)
				}
			}
		}
	}
	for _, gv := range []string{"example.com/v1", "batch/v9"} {
		list, err := cs.ServerResourcesForGroupVersion(ctx, gv)
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s, which the server does not serve: %v, %v; want an error IsNotFound tells", gv, list, err)
		}
	}
}

// TestMapper maps a core kind of each scope, a kind of a group a CRD adds
// (JobSet), kinds the server does not serve, and the first of several versions
// it serves.
func TestMapper(t *testing.T) {
	cs, _ := newClientset(t)
	m := kubeclient.NewMapper(cs)
	for _, tc := range []struct {
		gk       schema.GroupKind
		versions []string
		want     *meta.RESTMapping
	}{
		{schema.GroupKind{Kind: "Pod"}, []string{"v1"}, &meta.RESTMapping{
			Resource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, Scope: meta.RESTScopeNamespace}},
		{schema.GroupKind{Kind: "Node"}, []string{"v1"}, &meta.RESTMapping{
			Resource: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Node"}, Scope: meta.RESTScopeRoot}},
		{schema.GroupKind{Group: "jobset.x-k8s.io", Kind: "JobSet"}, []string{"v1alpha2"}, &meta.RESTMapping{
			Resource: simcluster.JobSetGVR, GroupVersionKind: simcluster.JobSetGVR.GroupVersion().WithKind("JobSet"), Scope: meta.RESTScopeNamespace}},
		{schema.GroupKind{Group: "apps", Kind: "Deployment"}, []string{"v1beta9", "v1"}, &meta.RESTMapping{
			Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Scope: meta.RESTScopeNamespace}},
	} {
		got, err := m.RESTMapping(tc.gk, tc.versions...)
		if err != nil {
			t.Errorf("%s %v: %v", tc.gk, tc.versions, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b meta.RESTScope) bool { return a.Name() == b.Name() })); diff != "" {
			t.Errorf("%s %v (-want +got):\n%s", tc.gk, tc.versions, diff)
		}
	}
	for _, tc := range []struct {
		gk       schema.GroupKind
		versions []string
	}{
		{schema.GroupKind{Group: "example.com", Kind: "Widget"}, []string{"v1"}},
		{schema.GroupKind{Kind: "Pod"}, []string{"v2"}},
		{schema.GroupKind{Kind: "Podd"}, []string{"v1"}},
		{schema.GroupKind{Kind: "Pod"}, nil},
	} {
		got, err := m.RESTMapping(tc.gk, tc.versions...)
		if !meta.IsNoMatchError(err) {
			t.Errorf("%s %v: %v, %v; want an error meta.IsNoMatchError tells", tc.gk, tc.versions, got, err)
		}
	}
}

// TestMapperReset: a kind that a CRD adds after the mapper asked for its group
// version stays unknown to the mapper until Reset, and is mapped after it.
func TestMapperReset(t *testing.T) {
	cs, sim := newClientset(t)
	ctx := context.Background()
	m := kubeclient.NewMapper(cs)
	const group = "kubeclient.test.manifold.dev"
	gk := schema.GroupKind{Group: group, Kind: "Widget"}
	if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("Widget before its CRD: %v; want no match", err)
	}

	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := sim.Dynamic.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sim.Dynamic.Resource(crdGVR).Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	})
	// The server serves the new group version once the CRD is established.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := cs.ServerResourcesForGroupVersion(ctx, group+"/v1")
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			t.Fatalf("the CRD's group version is not served: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if _, err := m.RESTMapping(gk, "v1"); !meta.IsNoMatchError(err) {
		t.Errorf("Widget after its CRD, before Reset: %v; want no match (the mapper keeps what it asked)", err)
	}
	m.Reset()
	got, err := m.RESTMapping(gk, "v1")
	if err != nil {
		t.Fatalf("Widget after Reset: %v", err)
	}
	want := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	if got.Resource != want || got.Scope.Name() != meta.RESTScopeNameNamespace {
		t.Errorf("Widget after Reset: %s, scope %s; want %s, namespaced", got.Resource, got.Scope.Name(), want)
	}
}

// TestPods creates a pod on the simulated cluster's real node, gets it, lists
// it (and only it, by label), watches it until it has run, reads its log
// through GetLogs, and deletes it.
func TestPods(t *testing.T) {
	cs, sim := newClientset(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node := sim.RealNode(t)
	sim.PushBusybox(t, "busybox:1.37")
	ns := sim.Namespace(t)
	pods := cs.CoreV1().Pods(ns)
	pod := func(name, value string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubeclient-test": value}},
			Spec: corev1.PodSpec{
				NodeName:      node.Name,
				Tolerations:   []corev1.Toleration{simcluster.RealNodeToleration},
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "busybox:1.37", Command: []string{"sh", "-c", "echo written by " + name}}},
			},
		}
	}
	created, err := pods.Create(ctx, pod("logged", "listed"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Namespace != ns || created.UID == "" {
		t.Fatalf("created pod %s/%s, uid %q", created.Namespace, created.Name, created.UID)
	}
	if _, err := pods.Create(ctx, pod("other", "not-listed"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "logged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != created.UID || got.Spec.NodeName != node.Name {
		t.Errorf("got pod uid %s on %s, want %s on %s", got.UID, got.Spec.NodeName, created.UID, node.Name)
	}
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "kubeclient-test=listed"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].UID != created.UID {
		t.Errorf("listed %d pods by label, want the one created", len(list.Items))
	}

	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = "metadata.name=logged"
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = "metadata.name=logged"
			return pods.Watch(ctx, o)
		},
	}
	ended, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, nil, func(e watch.Event) (bool, error) {
		p, ok := e.Object.(*corev1.Pod)
		return ok && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed), nil
	})
	if err != nil {
		t.Fatalf("the pod did not end: %v", err)
	}
	if phase := ended.Object.(*corev1.Pod).Status.Phase; phase != corev1.PodSucceeded {
		t.Errorf("pod %s", phase)
	}
	logs, err := pods.GetLogs("logged", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
	if err != nil || string(logs) != "written by logged\n" {
		t.Errorf("log %.200q, %v; want %q", logs, err, "written by logged\n")
	}

	if err := pods.Delete(ctx, "logged", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "logged", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get of the deleted pod: %v; want not found", err)
	}
	if err := pods.Delete(ctx, "logged", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v; want not found", err)
	}
}

// TestGetLogsRequest: GetLogs asks the log subresource of the pod in its
// namespace, with the options as query parameters. Nothing is sent.
func TestGetLogsRequest(t *testing.T) {
	cs, err := kubeclient.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	u := cs.CoreV1().Pods("team").GetLogs("train-0", &corev1.PodLogOptions{Container: "main", Follow: true, TailLines: new(int64(20))}).URL()
	if u.Path != "/api/v1/namespaces/team/pods/train-0/log" {
		t.Errorf("path %s", u.Path)
	}
	if diff := cmp.Diff(url.Values{"container": {"main"}, "follow": {"true"}, "tailLines": {"20"}}, u.Query()); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}
}

// TestInformer: an informer of the pods of a namespace, with a tweak that
// selects by label, syncs with the pods that match, then sees a matching pod
// added and deleted, and never one that does not match.
func TestInformer(t *testing.T) {
	cs, sim := newClientset(t)
	ns := sim.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pods := cs.CoreV1().Pods(ns)
	create := func(name, value string) {
		t.Helper()
		_, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubeclient-test": value}},
			// No node has this instance type: the pods stay Pending, untouched.
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{corev1.LabelInstanceTypeStable: "no-such-type"},
				Containers:   []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	create("watched-before", "watched")
	create("unwatched-before", "unwatched")

	inf := kubeclient.Informer(pods, &corev1.Pod{}, func(o *metav1.ListOptions) { o.LabelSelector = "kubeclient-test=watched" })
	type event struct{ kind, name string }
	var mu sync.Mutex
	var events []event
	seen := make(chan struct{}, 100)
	record := func(kind string) func(obj any) {
		return func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			p, ok := obj.(*corev1.Pod)
			if !ok {
				t.Errorf("%s event of a %T", kind, obj)
				return
			}
			mu.Lock()
			events = append(events, event{kind, p.Name})
			mu.Unlock()
			seen <- struct{}{}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: record("add"), DeleteFunc: record("delete")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { inf.RunWithContext(ctx) })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	lister := corev1listers.NewPodLister(inf.GetIndexer())
	synced, err := lister.Pods(ns).List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0].Name != "watched-before" {
		t.Errorf("synced %d pods, want watched-before alone", len(synced))
	}

	// The watch delivers events in the server's order: the unwatched pod is
	// created before the watched one is deleted, so by the time the delete is
	// seen, an add of the unwatched pod would have been seen too.
	create("unwatched-after", "unwatched")
	create("watched-after", "watched")
	if err := pods.Delete(ctx, "watched-after", metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))}); err != nil {
		t.Fatal(err)
	}
	want := []event{{"add", "watched-before"}, {"add", "watched-after"}, {"delete", "watched-after"}}
	for {
		mu.Lock()
		n := len(events)
		mu.Unlock()
		if n >= len(want) {
			break
		}
		select {
		case <-seen:
		case <-ctx.Done():
			t.Fatalf("the informer saw %v, want %v", events, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, events, cmp.AllowUnexported(event{})); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if slices.ContainsFunc(events, func(e event) bool { return strings.HasPrefix(e.name, "unwatched") }) {
		t.Errorf("the informer saw pods its tweak does not select: %v", events)
	}
}
