package kube

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/harness/simcluster"
	"github.com/manifoldflow/manifold/plan"
)

// TestServed asks the real API server's discovery for an API it serves and for
// ones it does not (a group that is not installed, as JobSet's is not without its
// controller, and a resource missing from a served group).
func TestServed(t *testing.T) {
	sc := simcluster.Shared(t)
	c, err := connect(context.Background(), Options{Kubeconfig: sc.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Served(jobSetGVR, "install it"); err != nil {
		t.Errorf("JobSets: %v; the simulated cluster serves them", err)
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "jobset.example.com", Version: "v1", Resource: "jobsets"},
		{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "nosuchthings"},
	} {
		err := c.Served(gvr, "install it")
		if err == nil || !strings.Contains(err.Error(), "does not serve "+gvr.Resource+" ("+gvr.GroupVersion().String()+"): install it") {
			t.Errorf("%s: %v; want it reported as not served", gvr, err)
		}
	}
}

// TestKueueNotServed: a step in a queue, on a cluster that does not serve Kueue's
// API, is reported with what to do. (Whether Kueue is served is discovery's
// answer, which TestServed and TestServedKueue check; here it is set, as the
// package's shared cluster may run Kueue by now.)
func TestKueueNotServed(t *testing.T) {
	sc := simcluster.Shared(t)
	c, err := connect(context.Background(), Options{Kubeconfig: sc.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	served := false
	c.kueue = &served
	s := &plan.Step{Name: "train", Queue: "training"}
	why, err := c.queueProblem(context.Background(), s, "default")
	if err != nil || !strings.Contains(why, "the cluster does not serve Kueue's API (kueue.x-k8s.io/v1beta2)") || !strings.Contains(why, "install Kueue") {
		t.Errorf("queueProblem = %q, %v; want Kueue reported as not installed", why, err)
	}
}

// TestServedKueue: discovery finds Kueue's Workloads once Kueue runs.
func TestServedKueue(t *testing.T) {
	sc := simcluster.Shared(t)
	sc.KueueNamespace(t)
	c, err := connect(context.Background(), Options{Kubeconfig: sc.Kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := c.kueueServed(); !ok || err != nil {
		t.Errorf("kueueServed = %v, %v; want true once Kueue runs", ok, err)
	}
}

// TestRequestLimits: the client a run or check makes is limited as Options say,
// and by DefaultQPS and DefaultBurst when they say nothing.
func TestRequestLimits(t *testing.T) {
	sc := simcluster.Shared(t)
	for _, tt := range []struct {
		qps   float32
		burst int
		want  [2]float64
	}{
		{0, 0, [2]float64{DefaultQPS, DefaultBurst}},
		{7.5, 9, [2]float64{7.5, 9}},
	} {
		c, err := connect(context.Background(), Options{Kubeconfig: sc.Kubeconfig, QPS: tt.qps, Burst: tt.burst})
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]float64{float64(c.Config.QPS), float64(c.Config.Burst)}; got != tt.want {
			t.Errorf("Options{QPS: %v, Burst: %d}: the client's QPS and burst are %v, want %v", tt.qps, tt.burst, got, tt.want)
		}
	}
}
