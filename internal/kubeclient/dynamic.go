package kubeclient

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// DynamicInformer returns a shared informer of resource gvr in namespace ns
// (every namespace when ns is ""), through dyn, indexed by namespace and with
// tweak (when not nil) applied to the options of every list and watch: the
// informer client-go's dynamicinformer.NewFilteredDynamicSharedInformerFactory
// makes, named gvr in the reflector's logs, without a resync. Its indexer
// serves cache.NewGenericLister(inf.GetIndexer(), gvr.GroupResource()).
func DynamicInformer(dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	lw := ListWatch(dyn.Resource(gvr).Namespace(ns), tweak)
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, dyn), &unstructured.Unstructured{},
		cache.SharedIndexInformerOptions{
			Indexers:          cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			ObjectDescription: gvr.String(),
		})
}
