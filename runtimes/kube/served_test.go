package kube

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/runtimes/kube/simcluster"
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
	if err := c.served(jobSetGVR, "install it"); err != nil {
		t.Errorf("JobSets: %v; the simulated cluster serves them", err)
	}
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "jobset.example.com", Version: "v1", Resource: "jobsets"},
		{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "nosuchthings"},
	} {
		err := c.served(gvr, "install it")
		if err == nil || !strings.Contains(err.Error(), "does not serve "+gvr.Resource+" ("+gvr.GroupVersion().String()+"): install it") {
			t.Errorf("%s: %v; want it reported as not served", gvr, err)
		}
	}
}
