package kubeclient

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

// TestDynamicInformer checks that the informer lists the namespace it is
// given with the tweak applied, and indexes what it caches by namespace.
func TestDynamicInformer(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	widget := func(ns, name string, lbls map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("example.com/v1")
		u.SetKind("Widget")
		u.SetNamespace(ns)
		u.SetName(name)
		u.SetLabels(lbls)
		return u
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "WidgetList"},
		widget("a", "mine", map[string]string{"run": "r1"}),
		widget("a", "other", map[string]string{"run": "r2"}),
		widget("b", "elsewhere", map[string]string{"run": "r1"}),
	)
	inf := DynamicInformer(dyn, gvr, "a", func(o *metav1.ListOptions) { o.LabelSelector = "run=r1" })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer's cache did not sync")
	}

	objs, err := cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()).ByNamespace("a").List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.(*unstructured.Unstructured).GetName())
	}
	if diff := cmp.Diff([]string{"mine"}, got); diff != "" {
		t.Errorf("cached widgets of namespace a (-want +got):\n%s", diff)
	}
	if _, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, "a"); err != nil {
		t.Errorf("namespace index: %v", err)
	}
}
