package kind

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/harness/simcluster"
)

// The tests below run against the simulated cluster's real API server (kwok
// plays the kubelet), standing in for a kind cluster after kind created it.

func TestMain(m *testing.M) { os.Exit(simcluster.Main(m)) }

// simClients returns the clients Up makes (connect), of the simulated cluster.
func simClients(t *testing.T) *clients {
	t.Helper()
	cl, err := connect(simcluster.Shared(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// kindNode creates a node as kind's kubelet registers it (run by kwok, as the
// simulated cluster's fake nodes are), and deletes it when t ends.
func kindNode(t *testing.T, cl *clients, name string, labels map[string]string, taints ...corev1.Taint) {
	t.Helper()
	labels["kubernetes.io/hostname"] = name
	_, err := cl.client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{simcluster.FakeNodeAnnotation: "fake"}},
		Spec:       corev1.NodeSpec{Taints: taints},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// TestSettle: what Up does once kind has made the cluster of
// --simulate trn1.32xlarge=2,inf2.xlarge=1 — a control-plane node with kubeadm's
// taint and three workers carrying the config's labels: it waits for them, shapes
// each worker as the instance type it records, and, every worker being an
// accelerator node, lets the control plane take the other pods.
func TestSettle(t *testing.T) {
	cl := simClients(t)
	ctx := context.Background()
	kindNode(t, cl, "kindtest-control-plane", map[string]string{labelControlPlane: ""},
		corev1.Taint{Key: taintControlPlane, Effect: corev1.TaintEffectNoSchedule})
	groups := []Group{{"trn1.32xlarge", 2}, {"inf2.xlarge", 1}}
	workers := []string{"kindtest-worker", "kindtest-worker2", "kindtest-worker3"}
	for i, typ := range workerTypes(groups) {
		kindNode(t, cl, workers[i], map[string]string{LabelSimulate: typ})
	}
	var log bytes.Buffer
	err := settle(ctx, cl, "kindtest", Options{Simulate: groups}, 4, 2*time.Minute, newLogger(&log))
	if err != nil {
		t.Fatalf("settle: %v\n%s", err, log.String())
	}
	want := map[string]struct{ neuron, efa, taint string }{
		"kindtest-worker":  {"16", "8", "aws.amazon.com/neuron:NoSchedule"},
		"kindtest-worker2": {"16", "8", "aws.amazon.com/neuron:NoSchedule"},
		"kindtest-worker3": {"1", "", "aws.amazon.com/neuron:NoSchedule"},
	}
	for name, w := range want {
		n, err := cl.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		typ := n.Labels[LabelSimulate]
		if got := n.Labels["node.kubernetes.io/instance-type"]; got != typ {
			t.Errorf("%s: instance-type label %q, want %q", name, got, typ)
		}
		q := n.Status.Allocatable["aws.amazon.com/neuron"]
		if q.String() != w.neuron {
			t.Errorf("%s: allocatable Neuron %s, want %s", name, q.String(), w.neuron)
		}
		efa, ok := n.Status.Allocatable["vpc.amazonaws.com/efa"]
		if got := efa.String(); (w.efa == "" && ok) || (w.efa != "" && got != w.efa) {
			t.Errorf("%s: allocatable EFA %s (present %v), want %q", name, got, ok, w.efa)
		}
		var taints []string
		for _, tn := range n.Spec.Taints {
			if tn.Key != corev1.TaintNodeNotReady && tn.Key != corev1.TaintNodeUnreachable {
				taints = append(taints, tn.ToString())
			}
		}
		if strings.Join(taints, " ") != w.taint {
			t.Errorf("%s: taints %v, want %s", name, taints, w.taint)
		}
	}
	cp, err := cl.client.CoreV1().Nodes().Get(ctx, "kindtest-control-plane", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range cp.Spec.Taints {
		if tn.Key == taintControlPlane {
			t.Errorf("the control plane keeps its taint %s although every worker is tainted", tn.ToString())
		}
	}
	for _, line := range []string{
		"kindtest-worker: trn1.32xlarge: aws.amazon.com/neuron 16, vpc.amazonaws.com/efa 8; taint aws.amazon.com/neuron:NoSchedule\n",
		"kindtest-worker3: inf2.xlarge: aws.amazon.com/neuron 1; taint aws.amazon.com/neuron:NoSchedule\n",
		"kindtest-control-plane: takes the pods that tolerate no accelerator taint (its control-plane taint is removed)\n",
		"kind cluster kindtest is ready: kubeconfig context kind-kindtest\n",
	} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("settle did not say %q; it said:\n%s", line, log.String())
		}
	}
}

// TestApplyComponentsDryRun applies every embedded manifest to the API server
// with dryRun=All and strict field validation: the server (with its admission
// and the CRDs' own schemas) accepts each object as it is. The simulated
// cluster already has the namespaces; nothing is stored. The simulated
// cluster also has JobSet's webhook configurations, pointing at its controller
// by URL; applied over them, the manifest's (by service) would hold both, which
// the server refuses: they are applied under names of their own. An object with
// a field the server does not know is refused, so the check can fail.
func TestApplyComponentsDryRun(t *testing.T) {
	cl := simClients(t)
	ctx := context.Background()
	for _, comp := range Components {
		objs, err := comp.Objects()
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
				o.SetName("dryrun-" + o.GetName())
			}
		}
		if err := apply(ctx, cl.dyn, cl.mapper, objs, true); err != nil {
			t.Errorf("%s: %v", comp.Name, err)
		}
	}
	objs, err := Components[0].Objects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			o = o.DeepCopy()
			o.Object["spec"].(map[string]any)["replicaz"] = 1
			err := apply(ctx, cl.dyn, cl.mapper, []*unstructured.Unstructured{o}, true)
			if err == nil || !strings.Contains(err.Error(), "replicaz") {
				t.Errorf("an unknown field was not refused: %v", err)
			}
		}
	}
	// Dry run: the JobSet controller's Deployment was not made.
	if _, err := cl.client.AppsV1().Deployments("jobset-system").Get(ctx, "jobset-controller-manager", metav1.GetOptions{}); err == nil {
		t.Error("a dry run created jobset-system/jobset-controller-manager")
	}
}

// TestWaitAvailable: a Deployment whose pods run (kwok runs them) is seen
// Available through a watch; one whose pods cannot be scheduled is reported,
// with its replicas and the command that shows why, when the wait ends.
func TestWaitAvailable(t *testing.T) {
	sim := simcluster.Shared(t)
	cl := simClients(t)
	ns := sim.Namespace(t)
	ctx := context.Background()
	deploy := func(name, instanceType string) {
		labels := map[string]string{"app": name}
		_, err := sim.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"node.kubernetes.io/instance-type": instanceType},
						Containers:   []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	deploy("runs", simcluster.CPUInstanceType)
	deploy("stuck", "no-such-type")
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := waitAvailable(wctx, cl.client, ns, "runs"); err != nil {
		t.Errorf("a Deployment kwok runs: %v", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := waitAvailable(sctx, cl.client, ns, "stuck")
	if err == nil {
		t.Fatal("a Deployment whose pod cannot be scheduled was Available")
	}
	for _, want := range []string{"deployment " + ns + "/stuck is not available (0 of 1 replicas available", "see kubectl -n " + ns + " describe deployment stuck"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
