package kube

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	jobsetconst "sigs.k8s.io/jobset/pkg/constants"

	"github.com/manifoldflow/manifold/internal/kubeclient"
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

	// What the informers watch, to start them anew (relist).
	c          *cluster
	namespaces []string
	kinds      []schema.GroupVersionResource
	workload   bool
	// selector picks the run's own objects (runSelector).
	selector string

	mu sync.Mutex
	// dirty holds the keys (unitKey) of the Jobs and JobSets a change concerned
	// since take; all is set when a change could not be tied to one.
	dirty map[string]bool
	all   bool
	// objects counts the run's Jobs, JobSets, Services and pods in the caches
	// of the informers running (start gives each set its own count).
	objects atomic.Pointer[atomic.Int64]
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
		if job, index, ok := podIndex(o); ok {
			// An item of a fan-out (one Indexed Job): the item and the Job.
			return []string{itemKey(o.Namespace, job, index), unitKey(o.Namespace, job)}
		}
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
	jobs batchlisters.JobLister // nil unless the run creates Jobs
	// pods holds the run's pods, indexed by the Job or JobSet they belong to
	// (podOwnerIndex).
	pods     cache.Indexer
	services corelisters.ServiceLister // nil unless the run creates Services
	jobSets  cache.GenericLister       // nil unless the run creates JobSets
	// workloads holds every Kueue Workload of the namespace (Kueue does not copy
	// the run's label to them), indexed by owner uid; nil unless the run has
	// queued steps on a cluster that serves Kueue.
	workloads cache.SharedIndexInformer
}

// watch starts the informers of the run's objects (those selector picks: the
// run's own, runSelector) in namespaces, of its pods and of kinds (what it
// creates: createdKinds), and waits for their caches to fill. It watches
// nothing else, so that RBAC need let the run list and watch no more (Needs).
func watch(ctx context.Context, c *cluster, namespaces []string, kinds []schema.GroupVersionResource, workloads bool, selector string) (*watcher, error) {
	w := &watcher{changed: make(chan struct{}, 1), c: c, namespaces: namespaces, kinds: kinds, workload: workloads, selector: selector, dirty: map[string]bool{}, all: true}
	ns, cancel, objects, err := w.start(ctx, nil)
	if err != nil {
		return nil, err
	}
	w.ns, w.cancel = ns, cancel
	w.objects.Store(objects)
	return w, nil
}

// relistTimeout bounds the wait for informers started anew to fill their caches.
const relistTimeout = time.Minute

// relist starts the informers anew, once their caches have filled, in place of
// the running ones: after an outage those back off (for up to a minute) before
// they try the API server again, while new ones list what it holds at once. The
// running ones are kept if the new ones cannot fill their caches.
func (w *watcher) relist(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, relistTimeout)
	defer cancel()
	ns, stop, objects, err := w.start(context.WithoutCancel(ctx), ctx.Done())
	if err != nil {
		return err
	}
	w.cancel()
	w.ns, w.cancel = ns, stop
	w.objects.Store(objects)
	w.touch("")
	return nil
}

// start starts the informers and waits for their caches to fill, or for abort
// to close. It returns them by namespace, what stops them, and the count of the
// run's objects in their caches.
func (w *watcher) start(ctx context.Context, abort <-chan struct{}) (map[string]*nsWatch, context.CancelFunc, *atomic.Int64, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := w.c
	objects := new(atomic.Int64)
	handler, workloadHandler := w.handlers(objects)
	fail := func(err error) (map[string]*nsWatch, context.CancelFunc, *atomic.Int64, error) {
		cancel()
		return nil, nil, nil, err
	}
	// setup gives an informer the run's handlers: its changes wake the loop, and
	// a list or watch that gets no answer is the run's outage to follow, not
	// an error logged at every try.
	setup := func(inf cache.SharedIndexInformer, handler cache.ResourceEventHandler) error {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		return inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if c.Saw(err) {
				return
			}
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
	}
	nss, err := w.informers(ctx, abort, setup, handler, workloadHandler)
	if err != nil {
		return fail(err)
	}
	return nss, cancel, objects, nil
}

// handlers returns the handlers of the informers: handler follows the run's
// own objects, which it counts in objects; the Workloads' handler does not
// count them. Each change touches the keys of what it changes.
func (w *watcher) handlers(objects *atomic.Int64) (handler, workloadHandler cache.ResourceEventHandlerFuncs) {
	changed := func(obj any) {
		keys := changedKeys(obj)
		if len(keys) == 0 {
			w.touch("")
		}
		for _, k := range keys {
			w.touch(k)
		}
	}
	handler = cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { objects.Add(1); changed(obj) },
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: func(obj any) { objects.Add(-1); changed(obj) },
	}
	workloadHandler = cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	}
	return handler, workloadHandler
}

// informers starts, until ctx ends, the informers of each of the run's
// namespaces, each given its handler by setup, and waits for their caches to
// fill, or for abort to close. It returns them by namespace.
func (w *watcher) informers(ctx context.Context, abort <-chan struct{}, setup func(cache.SharedIndexInformer, cache.ResourceEventHandler) error,
	handler, workloadHandler cache.ResourceEventHandler) (map[string]*nsWatch, error) {
	c := w.c
	tweak := func(o *metav1.ListOptions) { o.LabelSelector = w.selector }
	fail := func(err error) (map[string]*nsWatch, error) { return nil, err }
	var synced []cache.InformerSynced
	nss := map[string]*nsWatch{}
	slim := newSlimmer()
	for _, ns := range w.namespaces {
		nw := &nsWatch{}
		podInformer := kubeclient.Informer(c.Client.CoreV1().Pods(ns), &corev1.Pod{}, tweak)
		if err := podInformer.AddIndexers(cache.Indexers{podOwnerIndex: podOwners}); err != nil {
			return fail(err)
		}
		infs := []cache.SharedIndexInformer{podInformer}
		nw.pods = podInformer.GetIndexer()
		if slices.Contains(w.kinds, jobGVR) {
			inf := kubeclient.Informer(c.Client.BatchV1().Jobs(ns), &batchv1.Job{}, tweak)
			infs = append(infs, inf)
			nw.jobs = batchlisters.NewJobLister(inf.GetIndexer())
		}
		if slices.Contains(w.kinds, serviceGVR) {
			inf := kubeclient.Informer(c.Client.CoreV1().Services(ns), &corev1.Service{}, tweak)
			infs = append(infs, inf)
			nw.services = corelisters.NewServiceLister(inf.GetIndexer())
		}
		if slices.Contains(w.kinds, jobSetGVR) {
			inf := kubeclient.DynamicInformer(c.Dynamic, jobSetGVR, ns, tweak)
			infs = append(infs, inf)
			nw.jobSets = cache.NewGenericLister(inf.GetIndexer(), jobSetGVR.GroupResource())
		}
		for _, inf := range infs {
			if err := inf.SetTransform(slim.transform); err != nil {
				return fail(err)
			}
			if err := setup(inf, handler); err != nil {
				return fail(err)
			}
			synced = append(synced, inf.HasSynced)
		}
		if w.workload {
			inf := kubeclient.DynamicInformer(c.Dynamic, workloadGVR, ns, nil)
			if err := inf.AddIndexers(cache.Indexers{ownerIndex: ownerUIDs}); err != nil {
				return fail(err)
			}
			if err := setup(inf, workloadHandler); err != nil {
				return fail(err)
			}
			synced = append(synced, inf.HasSynced)
			nw.workloads = inf
			infs = append(infs, inf)
		}
		for _, inf := range infs {
			go inf.RunWithContext(ctx)
		}
		nss[ns] = nw
	}
	done := ctx.Done()
	if abort != nil {
		both, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-abort:
				stop()
			case <-both.Done():
			}
		}()
		done = both.Done()
	}
	if !cache.WaitForCacheSync(done, synced...) {
		return fail(fmt.Errorf("watching the run's objects on the cluster at %s did not start", c.Host))
	}
	return nss, nil
}

// slimmer is the transform of one set of the watcher's informers: it takes
// the server-side apply bookkeeping (metadata.managedFields), which the runner
// never reads, off each object before the informers cache it, a good part of
// a cached pod or Job's memory, and slims a pod further (slimPod), since a
// fan-out of 10,000 items caches 10,000 pods. The pods of one Job share one
// copy of what they have alike: their labels and their containers.
type slimmer struct {
	mu         sync.Mutex
	labels     map[string]map[string]string
	containers map[string][]corev1.Container
}

func newSlimmer() *slimmer {
	return &slimmer{labels: map[string]map[string]string{}, containers: map[string][]corev1.Container{}}
}

// transform is the informers' transform (cache.TransformFunc).
func (s *slimmer) transform(obj any) (any, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return s.slimPod(p), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// sharedLabels returns p's labels that the runner reads (podLabelsRead) as a
// map that every pod with the same ones shares; nil when it has none.
func (s *slimmer) sharedLabels(p *corev1.Pod) map[string]string {
	var key strings.Builder
	for _, k := range podLabelsRead {
		if v, ok := p.Labels[k]; ok {
			key.WriteString(k + "=" + v + "\x00")
		}
	}
	if key.Len() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.labels[key.String()]; ok {
		return m
	}
	m := map[string]string{}
	for _, k := range podLabelsRead {
		if v, ok := p.Labels[k]; ok {
			m[k] = v
		}
	}
	s.labels[key.String()] = m
	return m
}

// sharedContainers returns p's containers' names and images as a slice that
// every pod with the same ones shares.
func (s *slimmer) sharedContainers(p *corev1.Pod) []corev1.Container {
	var key strings.Builder
	for _, c := range p.Spec.Containers {
		key.WriteString(c.Name + "\x00" + c.Image + "\x00")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs, ok := s.containers[key.String()]; ok {
		return cs
	}
	cs := make([]corev1.Container, len(p.Spec.Containers))
	for i, c := range p.Spec.Containers {
		cs[i] = corev1.Container{Name: c.Name, Image: c.Image}
	}
	s.containers[key.String()] = cs
	return cs
}

// podLabelsRead are the only labels of a pod the runner reads: those that
// name its Job or JobSet and the attempt it belongs to.
var podLabelsRead = []string{
	batchv1.JobNameLabel, batchv1.ControllerUidLabel,
	jobsetv1.JobSetNameKey, jobsetv1.JobSetUIDKey, jobsetv1.ReplicatedJobNameKey, jobsetv1.JobIndexKey, jobsetconst.RestartsKey,
}

// slimPod is what the runner keeps of a pod: its name, namespace, UID,
// version, creation and deletion times, of its labels podLabelsRead and of
// its annotations the completion index; of its spec its node, restart
// policy and its containers' names and images; of its status its phase,
// reason, message, conditions and its containers' names and states. That is
// all the runner reads of a pod (its variables, volumes, placement, the
// labels the run put on it, its addresses are most of it). Of a pod that
// succeeded it keeps less again: of its status only its phase and how each
// container ended (exit code, reason, start and end), which is all the
// runner reads of it once it has ended well. The labels and containers are
// shared by the pods that have the same (sharedLabels, sharedContainers),
// and the strings every pod of a Job has alike (its node, its namespace, its
// containers' names) are interned, so 10,000 pods of one Indexed Job hold one
// copy of each.
func (s *slimmer) slimPod(p *corev1.Pod) *corev1.Pod {
	intern := func(s string) string { return unique.Make(s).Value() }
	out := &corev1.Pod{
		TypeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: intern(p.Namespace), UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			Labels: s.sharedLabels(p),
		},
		Spec:   corev1.PodSpec{NodeName: intern(p.Spec.NodeName), RestartPolicy: p.Spec.RestartPolicy, Containers: s.sharedContainers(p)},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	if v, ok := p.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		out.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: intern(v)}
	}
	succeeded := p.Status.Phase == corev1.PodSucceeded
	if !succeeded {
		out.Status.Reason, out.Status.Message, out.Status.Conditions = p.Status.Reason, p.Status.Message, p.Status.Conditions
	}
	if len(p.Status.ContainerStatuses) > 0 {
		out.Status.ContainerStatuses = make([]corev1.ContainerStatus, len(p.Status.ContainerStatuses))
		for i, cs := range p.Status.ContainerStatuses {
			state := cs.State
			if t := state.Terminated; succeeded && t != nil {
				state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: t.ExitCode, Reason: intern(t.Reason), StartedAt: t.StartedAt, FinishedAt: t.FinishedAt,
				}}
			}
			out.Status.ContainerStatuses[i] = corev1.ContainerStatus{Name: intern(cs.Name), State: state}
		}
	}
	return out
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
	l := w.ns[ns].jobs
	if l == nil {
		return nil
	}
	j, err := l.Jobs(ns).Get(name)
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

// podIndexKey indexes the pods of an Indexed Job by the Job's name and
// their completion index (indexValue), for the items of a fan-out.
const podIndexKey = "index"

// indexValue is the value of podIndexKey of the pods of index of Job job.
func indexValue(job, index string) string { return job + "/" + index }

// podIndex returns the Job and completion index of p, a pod of an Indexed Job
// not made by a JobSet (whose Jobs' indexes are nodes' ranks).
func podIndex(p *corev1.Pod) (job, index string, ok bool) {
	job, ok = p.Labels[batchv1.JobNameLabel]
	if !ok {
		return "", "", false
	}
	if _, js := p.Labels[jobsetv1.JobSetNameKey]; js {
		return "", "", false
	}
	index, ok = p.Annotations[batchv1.JobCompletionIndexAnnotation]
	return job, index, ok
}

func podOwners(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	if job, index, ok := podIndex(p); ok {
		keys = append(keys, podIndexKey+"="+indexValue(job, index))
	}
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
func (w *watcher) empty() bool { return w.objects.Load().Load() == 0 }

// left names what the caches still hold of the run: every Job, JobSet, Service
// and pod.
func (w *watcher) left() []string {
	var out []string
	for ns, nw := range w.ns {
		if nw.jobs != nil {
			if js, err := nw.jobs.Jobs(ns).List(labels.Everything()); err == nil {
				for _, j := range js {
					out = append(out, "Job "+ns+"/"+j.Name)
				}
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
		if nw.services != nil {
			if ss, err := nw.services.Services(ns).List(labels.Everything()); err == nil {
				for _, s := range ss {
					out = append(out, "Service "+ns+"/"+s.Name)
				}
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
