package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/runtimes/kube"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// gangQuota has room for one 2-node trn1 step at a time.
var gangQuota = corev1.ResourceList{
	corev1.ResourceCPU:      resource.MustParse("100"),
	corev1.ResourceMemory:   resource.MustParse("1Ti"),
	"aws.amazon.com/neuron": resource.MustParse("32"),
	"vpc.amazonaws.com/efa": resource.MustParse("16"),
}

// twoGangs is two 2-node trn1 steps that may run side by side, both in queue
// training, whose pods run for a few seconds.
func twoGangs() *sdk.Flow {
	gang := []sdk.StepOption{sdk.Command("torchrun", "train.py"), sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"),
		sdk.Trainium(16), sdk.EFA(8)}
	return sdk.NewFlow("kube-queued", sdk.Image("example.com/flow:v1"), sdk.Queue("training"),
		sdk.Label(simcluster.LabelRunFor, "4s")).
		Step("first", gang...).
		Step("second", gang...)
}

// TestQueued: with quota for one of two 2-node steps, Kueue admits one and holds
// the other; run --kube shows the held one queued with Kueue's reason (its
// pending timeout, far shorter than the wait, does not fail it), then admitted,
// and both complete.
func TestQueued(t *testing.T) {
	c := simcluster.Shared(t)
	for _, as := range []string{kube.AsJob, kube.AsJobSet} {
		t.Run(as, func(t *testing.T) {
			ns := c.KueueNamespace(t)
			c.KueueQueue(t, ns, "training", gangQuota)
			o := options(c, ns, t.TempDir())
			o.As, o.PendingGrace, o.PendingTimeout = as, time.Second, 2*time.Second
			r := runFlow(t, context.Background(), compileFlow(t, twoGangs()), o)
			if r.err != nil {
				t.Fatalf("run: %v", r.err)
			}
			out := r.out.String()
			const held = "queued: waiting for quota in LocalQueue training: couldn't assign flavors"
			if n := strings.Count(out, held); n != 1 {
				t.Errorf("the step held for quota was reported %d times as %q; want once", n, held)
			}
			if !strings.Contains(out, "insufficient unused quota for aws.amazon.com/neuron") {
				t.Error("the output does not give Kueue's reason (the Neuron devices the quota lacks)")
			}
			if strings.Contains(out, "Kueue has made no Workload") {
				t.Error("a step was said to have no Workload, though Kueue made one at once")
			}
			if n := strings.Count(out, "admitted by Kueue"); n < 1 {
				t.Error("no step was reported admitted by Kueue")
			}
			for _, s := range []string{"first", "second"} {
				if got := r.tasks[s]; got.State != record.Succeeded {
					t.Errorf("%s: %s (%s); want succeeded", s, got.State, got.Error)
				}
			}
		})
	}
}

// TestQueueRefused: check reports, and run --kube refuses before creating
// anything, a step whose LocalQueue does not exist, one whose LocalQueue's
// ClusterQueue does not exist, and one whose PriorityClass or
// WorkloadPriorityClass does not exist.
func TestQueueRefused(t *testing.T) {
	c := simcluster.Shared(t)
	ctx := context.Background()
	ns := c.KueueNamespace(t)
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": "orphan", "namespace": ns},
		"spec":     map[string]any{"clusterQueue": ns + "-nowhere"},
	}}
	if _, err := c.Dynamic.Resource(simcluster.LocalQueueGVR).Namespace(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.KueueQueue(t, ns, "training", gangQuota)
	onlyPC := ns + "-only-pc"
	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: onlyPC}, Value: 10}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), onlyPC, metav1.DeleteOptions{})
	})

	for _, tc := range []struct {
		name string
		opts []sdk.StepOption
		want string
	}{
		{"no-local-queue", []sdk.StepOption{sdk.Queue("missing")},
			"it waits in the Kueue LocalQueue missing (sdk.Queue), which namespace " + ns + " does not have"},
		{"no-cluster-queue", []sdk.StepOption{sdk.Queue("orphan")},
			"its Kueue LocalQueue orphan submits to the ClusterQueue " + ns + "-nowhere, which does not exist"},
		{"no-priority-class", []sdk.StepOption{sdk.Priority("no-such-class")},
			"it asks for the PriorityClass no-such-class (sdk.Priority), which the cluster does not have"},
		{"no-workload-priority-class", []sdk.StepOption{sdk.Queue("training"), sdk.Priority(onlyPC)},
			"the cluster has no WorkloadPriorityClass " + onlyPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := compileFlow(t, sdk.NewFlow("kube-refused", sdk.Image("example.com/flow:v1")).
				Step("a", append([]sdk.StepOption{sdk.Command("a")}, tc.opts...)...))
			o := options(c, ns, t.TempDir())
			wantUnplaceable(t, p, o, tc.want)
			// --no-check skips the placement prediction, not this: the step
			// would never run.
			o.NoCheck = true
			r := runFlow(t, ctx, p, o)
			var unplaceable *kube.UnplaceableError
			if r.res != nil || r.err == nil || errors.As(r.err, &unplaceable) || !strings.Contains(r.err.Error(), "step a cannot run") || !strings.Contains(r.err.Error(), tc.want) {
				t.Errorf("run --no-check: result %v, error %v; want it refused before anything is created: %s", r.res, r.err, tc.want)
			}
		})
	}
	// The queue and priority that exist pass.
	p := compileFlow(t, sdk.NewFlow("kube-refused", sdk.Image("example.com/flow:v1")).Step("a", sdk.Command("a"), sdk.Queue("training")))
	report, err := kube.Check(ctx, p, options(c, ns, t.TempDir()))
	if err != nil || !report.OK {
		t.Errorf("check of a step in an existing queue: %+v, %v; want it OK", report, err)
	}
}
