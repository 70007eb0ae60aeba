package nodeshape

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/manifoldflow/manifold/internal/kubeclient"
)

// Keep watches the nodes named in shapes, each with the shape it must keep, and
// applies a node's shape again whenever the node lacks any of it: ApplyMeta when
// a label or taint is missing, ApplyStatus when capacity or allocatable of an
// extended resource differs (a kubelet that finds its node recreated zeroes
// them). It is driven by an informer on the nodes, not by polling; an apply
// that fails is retried with exponential backoff. reapplied, if not nil, is called after each apply
// with the node's name and the apply's error. Keep returns nil when ctx ends.
func Keep(ctx context.Context, c Nodes, shapes map[string]Shape, reapplied func(node string, err error)) error {
	if len(shapes) == 0 {
		return nil
	}
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "nodeshape"})
	enqueue := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			if _, keep := shapes[n.Name]; keep {
				queue.Add(n.Name)
			}
		}
	}
	informer := kubeclient.Informer(c, &corev1.Node{}, nil)
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	}); err != nil {
		return err
	}
	lister := corev1listers.NewNodeLister(informer.GetIndexer())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { informer.RunWithContext(ctx) })
	wg.Go(func() {
		for {
			name, shutdown := queue.Get()
			if shutdown {
				return
			}
			err := keep(ctx, c, lister.Get, name, shapes[name], reapplied)
			if err != nil && ctx.Err() == nil {
				queue.AddRateLimited(name)
			} else {
				queue.Forget(name)
			}
			queue.Done(name)
		}
	})
	<-ctx.Done()
	queue.ShutDown()
	wg.Wait()
	return nil
}

// keep applies what node name, as the informer last saw it, lacks of shape s.
func keep(ctx context.Context, c Nodes, get func(string) (*corev1.Node, error), name string, s Shape, reapplied func(string, error)) error {
	n, err := get(name)
	if apierrors.IsNotFound(err) {
		return nil // gone; a node of that name that comes back is an Add event
	}
	if err != nil {
		return err
	}
	if !s.Labelled(n) {
		err = ApplyMeta(ctx, c, name, s)
		if reapplied != nil {
			reapplied(name, err)
		}
		if err != nil {
			return err
		}
	}
	if !s.Advertised(n) {
		_, err = ApplyStatus(ctx, c, name, s)
		if reapplied != nil {
			reapplied(name, err)
		}
	}
	return err
}
