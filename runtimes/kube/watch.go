package kube

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/manifoldflow/manifold/plan"
)

// watcher keeps informer caches of the run's Jobs, JobSets, Services and pods
// (those labelled with the run) and, for a run with queued steps, of the Kueue
// Workloads of its namespaces, and signals every change on changed. It notes
// which Job or JobSet each change concerns (touched), so that the runner looks
// again only at those.
type watcher struct {
	changed chan struct{}
	cancel  context.CancelFunc
	ns      map[string]*nsWatch

	mu sync.Mutex
	// dirty holds the keys (unitKey) of the Jobs and JobSets a change concerned
	// since take; all is set when a change could not be tied to one.
	dirty map[string]bool
	all   bool
	// objects counts the run's Jobs, JobSets, Services and pods in the caches.
	objects atomic.Int64
}

// unitKey is the key by which the watcher names the Job or JobSet ns/name.
func unitKey(ns, name string) string { return ns + "/" + name }

// touch notes that the Job or JobSet key changed ("" for a change not tied to
// one: every unit is looked at again), and kicks.
func (w *watcher) touch(key string) {
	w.mu.Lock()
	if key == "" {
		w.all = true
	} else {
		w.dirty[key] = true
	}
	w.mu.Unlock()
	w.kick()
}

// take returns what changed since it was last called: every unit (all), or the
// keys of those touched.
func (w *watcher) take() (all bool, keys map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	all, keys = w.all, w.dirty
	w.all, w.dirty = false, map[string]bool{}
	return all, keys
}

// changedKeys returns the keys (unitKey) of the Jobs and JobSets a change of
// obj concerns: the Job or JobSet itself, a pod's JobSet or Job, a Workload's
// owners; nil when it cannot tell.
func changedKeys(obj any) []string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case *batchv1.Job:
		return []string{unitKey(o.Namespace, o.Name)}
	case *corev1.Pod:
		for _, key := range podOwnerLabels {
			if v, ok := o.Labels[key]; ok {
				// A JobSet's pods name their JobSet and their Job: either may be a unit.
				return []string{unitKey(o.Namespace, v), unitKey(o.Namespace, o.Labels[jobsetv1.JobSetNameKey])}
			}
		}
	case *corev1.Service:
		return []string{unitKey(o.Namespace, o.Name)}
	case *unstructured.Unstructured:
		if o.GetKind() == "JobSet" {
			return []string{unitKey(o.GetNamespace(), o.GetName())}
		}
		var keys []string
		for _, ref := range o.GetOwnerReferences() {
			keys = append(keys, unitKey(o.GetNamespace(), ref.Name))
		}
		return keys
	}
	return nil
}

type nsWatch struct {
	jobs batchlisters.JobLister
	// pods holds the run's pods, indexed by the Job or JobSet they belong to
	// (podOwnerIndex).
	pods     cache.Indexer
	services corelisters.ServiceLister
	jobSets  cache.GenericLister // nil unless the run creates JobSets
	// workloads holds every Kueue Workload of the namespace (Kueue does not copy
	// the run's label to them), indexed by owner uid; nil unless the run has
	// queued steps on a cluster that serves Kueue.
	workloads cache.SharedIndexInformer
}

// watch starts the informers of run id in namespaces and waits for their caches
// to fill.
func watch(ctx context.Context, c *cluster, namespaces []string, jobSets, workloads bool, id string) (*watcher, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &watcher{changed: make(chan struct{}, 1), cancel: cancel, ns: map[string]*nsWatch{}, dirty: map[string]bool{}, all: true}
	selector := plan.LabelRun + "=" + id
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = selector }
	changed := func(obj any) {
		keys := changedKeys(obj)
		if len(keys) == 0 {
			w.touch("")
		}
		for _, k := range keys {
			w.touch(k)
		}
	}
	// handler follows the run's own objects, which it counts; the Workloads'
	// handler does not count them.
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.objects.Add(1); changed(obj) },
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: func(obj any) { w.objects.Add(-1); changed(obj) },
	}
	workloadHandler := cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
		nw := &nsWatch{}
		podInformer := f.Core().V1().Pods().Informer()
		if err := podInformer.AddIndexers(cache.Indexers{podOwnerIndex: podOwners}); err != nil {
			cancel()
			return nil, err
		}
		for _, inf := range []cache.SharedIndexInformer{f.Batch().V1().Jobs().Informer(), podInformer, f.Core().V1().Services().Informer()} {
			if err := inf.SetTransform(dropManagedFields); err != nil {
				cancel()
				return nil, err
			}
			if _, err := inf.AddEventHandler(handler); err != nil {
				cancel()
				return nil, err
			}
			synced = append(synced, inf.HasSynced)
		}
		nw.jobs, nw.pods, nw.services = f.Batch().V1().Jobs().Lister(), podInformer.GetIndexer(), f.Core().V1().Services().Lister()
		f.Start(ctx.Done())
		if jobSets {
			df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dynamic, 0, ns, tweak)
			gi := df.ForResource(jobSetGVR)
			if err := gi.Informer().SetTransform(dropManagedFields); err != nil {
				cancel()
				return nil, err
			}
			if _, err := gi.Informer().AddEventHandler(handler); err != nil {
				cancel()
				return nil, err
			}
			synced = append(synced, gi.Informer().HasSynced)
			nw.jobSets = gi.Lister()
			df.Start(ctx.Done())
		}
		if workloads {
			wf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dynamic, 0, ns, nil)
			inf := wf.ForResource(workloadGVR).Informer()
			if err := inf.AddIndexers(cache.Indexers{ownerIndex: ownerUIDs}); err != nil {
				cancel()
				return nil, err
			}
			if _, err := inf.AddEventHandler(workloadHandler); err != nil {
				cancel()
				return nil, err
			}
			synced = append(synced, inf.HasSynced)
			nw.workloads = inf
			wf.Start(ctx.Done())
		}
		w.ns[ns] = nw
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		cancel()
		return nil, fmt.Errorf("watching the run's objects on the cluster at %s did not start", c.host)
	}
	return w, nil
}

// dropManagedFields takes the server-side apply bookkeeping (metadata.
// managedFields), which the runner never reads, off each object before the
// informers cache it: a good part of a cached pod or Job's memory.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// kick records that something changed, without blocking.
func (w *watcher) kick() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *watcher) stop() { w.cancel() }

// job returns the Job ns/name from the cache, or nil.
func (w *watcher) job(ns, name string) *batchv1.Job {
	j, err := w.ns[ns].jobs.Jobs(ns).Get(name)
	if err != nil {
		return nil
	}
	return j
}

// jobSet returns the JobSet ns/name from the cache, or nil.
func (w *watcher) jobSet(ns, name string) *unstructured.Unstructured {
	l := w.ns[ns].jobSets
	if l == nil {
		return nil
	}
	o, err := l.ByNamespace(ns).Get(name)
	if err != nil {
		return nil
	}
	u, _ := o.(*unstructured.Unstructured)
	return u
}

// podOwnerIndex indexes the run's cached pods by the labels that name their Job
// and JobSet, key=value, so that a unit finds its pods without going through
// every pod of the run at every change.
const podOwnerIndex = "owner-label"

// podOwnerLabels are the labels podOwnerIndex indexes.
var podOwnerLabels = []string{batchv1.JobNameLabel, jobsetv1.JobSetNameKey}

func podOwners(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, key := range podOwnerLabels {
		if v, ok := p.Labels[key]; ok {
			keys = append(keys, key+"="+v)
		}
	}
	return keys, nil
}

// pods returns the cached pods of ns whose label key (one of podOwnerLabels)
// is value.
func (w *watcher) pods(ns, key, value string) []*corev1.Pod {
	objs, _ := w.ns[ns].pods.ByIndex(podOwnerIndex, key+"="+value)
	ps := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			ps = append(ps, p)
		}
	}
	return ps
}

// empty reports whether the caches hold nothing of the run, without listing it.
func (w *watcher) empty() bool { return w.objects.Load() == 0 }

// left names what the caches still hold of the run: every Job, JobSet, Service
// and pod.
func (w *watcher) left() []string {
	var out []string
	for ns, nw := range w.ns {
		if js, err := nw.jobs.Jobs(ns).List(labels.Everything()); err == nil {
			for _, j := range js {
				out = append(out, "Job "+ns+"/"+j.Name)
			}
		}
		if nw.jobSets != nil {
			if js, err := nw.jobSets.ByNamespace(ns).List(labels.Everything()); err == nil {
				for _, o := range js {
					if u, ok := o.(*unstructured.Unstructured); ok {
						out = append(out, "JobSet "+ns+"/"+u.GetName())
					}
				}
			}
		}
		if ss, err := nw.services.Services(ns).List(labels.Everything()); err == nil {
			for _, s := range ss {
				out = append(out, "Service "+ns+"/"+s.Name)
			}
		}
		for _, o := range nw.pods.List() {
			if p, ok := o.(*corev1.Pod); ok {
				out = append(out, "Pod "+ns+"/"+p.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}
