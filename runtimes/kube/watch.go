package kube

import (
	"context"
	"fmt"
	"sort"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/manifoldflow/manifold/plan"
)

// watcher keeps informer caches of the run's Jobs, JobSets, Services and pods
// (those labelled with the run) and, for a run with queued steps, of the Kueue
// Workloads of its namespaces, and signals every change on changed.
type watcher struct {
	changed chan struct{}
	cancel  context.CancelFunc
	ns      map[string]*nsWatch
}

type nsWatch struct {
	jobs     batchlisters.JobLister
	pods     corelisters.PodLister
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
	w := &watcher{changed: make(chan struct{}, 1), cancel: cancel, ns: map[string]*nsWatch{}}
	selector := plan.LabelRun + "=" + id
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = selector }
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.kick() },
		UpdateFunc: func(any, any) { w.kick() },
		DeleteFunc: func(any) { w.kick() },
	}
	var synced []cache.InformerSynced
	for _, ns := range namespaces {
		f := informers.NewSharedInformerFactoryWithOptions(c.client, 0, informers.WithNamespace(ns), informers.WithTweakListOptions(tweak))
		nw := &nsWatch{}
		for _, inf := range []cache.SharedIndexInformer{f.Batch().V1().Jobs().Informer(), f.Core().V1().Pods().Informer(), f.Core().V1().Services().Informer()} {
			if _, err := inf.AddEventHandler(handler); err != nil {
				cancel()
				return nil, err
			}
			synced = append(synced, inf.HasSynced)
		}
		nw.jobs, nw.pods, nw.services = f.Batch().V1().Jobs().Lister(), f.Core().V1().Pods().Lister(), f.Core().V1().Services().Lister()
		f.Start(ctx.Done())
		if jobSets {
			df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.dynamic, 0, ns, tweak)
			gi := df.ForResource(jobSetGVR)
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
			if _, err := inf.AddEventHandler(handler); err != nil {
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

// pods returns the cached pods of ns whose labels have key=value.
func (w *watcher) pods(ns, key, value string) []*corev1.Pod {
	ps, _ := w.ns[ns].pods.Pods(ns).List(labels.SelectorFromSet(labels.Set{key: value}))
	return ps
}

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
		if ps, err := nw.pods.Pods(ns).List(labels.Everything()); err == nil {
			for _, p := range ps {
				out = append(out, "Pod "+ns+"/"+p.Name)
			}
		}
	}
	sort.Strings(out)
	return out
}
