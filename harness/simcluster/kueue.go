package simcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KueueNamespace is the namespace Kueue's controller manager runs in.
const KueueNamespace = "kueue-system"

// LabelKueue marks a namespace whose Jobs, JobSets and pods Kueue manages (value
// "true"). Kueue's job, JobSet and pod webhooks are registered for those
// namespaces only, so the tests that do not queue never wait on Kueue.
const LabelKueue = "sim.manifold.dev/kueue"

// Kueue's resources, in the version its controller manager stores.
var (
	ResourceFlavorGVR        = kueueGVR("resourceflavors")
	ClusterQueueGVR          = kueueGVR("clusterqueues")
	LocalQueueGVR            = kueueGVR("localqueues")
	WorkloadGVR              = kueueGVR("workloads")
	WorkloadPriorityClassGVR = kueueGVR("workloadpriorityclasses")
	TopologyGVR              = kueueGVR("topologies")
)

func kueueGVR(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: resource}
}

// StartKueue starts Kueue's controller manager once per cluster: it installs
// Kueue's CRDs, runs the controller manager with the batch/job, JobSet and pod
// integrations and its webhook server on a loopback port, and registers its
// webhooks by URL: those of Kueue's own kinds for every namespace, those of Jobs,
// JobSets and pods for the namespaces labelled LabelKueue. Calls after the first
// return the first's result. Kueue is not part of Start: the tests that do not
// queue pay nothing for it.
func (c *Cluster) StartKueue(ctx context.Context) error {
	c.kueue.once.Do(func() {
		c.kueue.err = c.startKueue(ctx)
		if c.kueue.err != nil {
			c.kueue.err = fmt.Errorf("start Kueue: %w\n%s", c.kueue.err, c.LogTails(40))
		}
	})
	return c.kueue.err
}

func (c *Cluster) startKueue(ctx context.Context) error {
	if err := c.installCRDs(ctx, filepath.Join(c.bin, "assets"), "kueue-crds"); err != nil {
		return err
	}
	if err := c.createNamespace(ctx, KueueNamespace); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	// The visibility server is off: it would bind a fixed port, and the
	// clusters of parallel test processes would take it from each other.
	path, err := c.managerConfig("kueue", "config.kueue.x-k8s.io/v1beta2", ports[0], fmt.Sprintf(`namespace: %s
managedJobsNamespaceSelector:
  matchLabels:
    %s: "true"
integrations:
  frameworks:
  - batch/job
  - jobset.x-k8s.io/jobset
  - pod
featureGates:
  VisibilityOnDemand: false
`, KueueNamespace, LabelKueue))
	if err != nil {
		return err
	}
	if err := kueueMetricsCert(); err != nil {
		return err
	}
	if err := c.run("kueue", []string{"--config=" + path, "--kubeconfig=" + c.Kubeconfig, "--zap-log-level=info"},
		"POD_NAMESPACE="+KueueNamespace, "KUBECONFIG="+c.Kubeconfig); err != nil {
		return err
	}
	managed := map[string]any{"matchLabels": map[string]any{LabelKueue: "true"}}
	return c.registerWebhooks(ctx, "kueue", ports[0], func(path string) (bool, map[string]any) {
		switch {
		case strings.Contains(path, "-kueue-x-k8s-io-"):
			return true, nil
		case strings.HasSuffix(path, "-batch-v1-job"), strings.HasSuffix(path, "-jobset-x-k8s-io-v1alpha2-jobset"), strings.HasSuffix(path, "--v1-pod"):
			return true, managed
		}
		return false, nil
	})
}

// kueueMetricsDir is where Kueue v0.17.0 reads its metrics server's certificate
// when it does not manage its own (cmd/kueue/main.go; a fixed path, where its
// deployment mounts a Secret). It exits when the files are missing, even with
// the metrics server off, as here.
const kueueMetricsDir = "/etc/kueue/metrics/certs"

// kueueMetricsCert writes a self-signed certificate and key to kueueMetricsDir
// unless both are there. They are never served (the metrics server is off), so
// every cluster on the machine can share them; they are left in place.
func kueueMetricsCert() error {
	crt, key := filepath.Join(kueueMetricsDir, "tls.crt"), filepath.Join(kueueMetricsDir, "tls.key")
	if _, err := tls.LoadX509KeyPair(crt, key); err == nil {
		return nil
	}
	fail := func(err error) error {
		return fmt.Errorf("Kueue needs a certificate in %s, which it reads from that fixed path, and it cannot be written (%w): run the tests as root, or create tls.crt and tls.key there once", kueueMetricsDir, err)
	}
	if err := os.MkdirAll(kueueMetricsDir, 0o755); err != nil {
		return fail(err)
	}
	certPEM, keyPEM, err := selfSigned("kueue-metrics")
	if err != nil {
		return err
	}
	// Each file is written whole under a name of its own and renamed into
	// place, so a cluster starting beside this one never reads half a file.
	for _, f := range []struct {
		path string
		data []byte
	}{{key, keyPEM}, {crt, certPEM}} {
		tmp, err := os.CreateTemp(kueueMetricsDir, ".tmp-*")
		if err != nil {
			return fail(err)
		}
		_, err = tmp.Write(f.data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), f.path)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return fail(err)
		}
	}
	return nil
}

// KueueQueue creates, for test t, a LocalQueue name in namespace ns that
// submits to a ClusterQueue of its own (named after ns and name) with one
// ResourceFlavor and quota for exactly the resources of quota, and deletes the
// cluster-scoped objects when t ends. It waits until the ClusterQueue is active.
// Resources missing from quota are not covered: a workload that asks for one is
// never admitted.
func (c *Cluster) KueueQueue(t testing.TB, ns, name string, quota corev1.ResourceList) {
	t.Helper()
	c.kueueQueue(t, ns, name, quota, nil)
}

// KueueTopologyQueue is KueueQueue for Kueue's topology-aware scheduling: its
// ResourceFlavor holds the nodes of instanceType and names a Topology of its own
// whose levels are level and then kubernetes.io/hostname, so Kueue admits a
// workload onto nodes it chooses within one domain of level. It returns the
// flavor's name.
func (c *Cluster) KueueTopologyQueue(t testing.TB, ns, name, instanceType, level string, quota corev1.ResourceList) string {
	t.Helper()
	return c.kueueQueue(t, ns, name, quota, &kueueTopology{instanceType: instanceType, levels: []string{level, corev1.LabelHostname}})
}

type kueueTopology struct {
	instanceType string
	levels       []string
}

func (c *Cluster) kueueQueue(t testing.TB, ns, name string, quota corev1.ResourceList, topo *kueueTopology) string {
	t.Helper()
	ctx := context.Background()
	cq := ns + "-" + name
	var covered []any
	var resources []any
	for _, r := range slices.Sorted(maps.Keys(quota)) {
		q := quota[r]
		covered = append(covered, string(r))
		resources = append(resources, map[string]any{"name": string(r), "nominalQuota": q.String()})
	}
	flavor := map[string]any{}
	var objs []*unstructured.Unstructured
	if topo != nil {
		var levels []any
		for _, l := range topo.levels {
			levels = append(levels, map[string]any{"nodeLabel": l})
		}
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology",
			"metadata": map[string]any{"name": cq},
			"spec":     map[string]any{"levels": levels},
		}})
		flavor["nodeLabels"] = map[string]any{corev1.LabelInstanceTypeStable: topo.instanceType}
		flavor["topologyName"] = cq
	}
	objs = append(objs,
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
			"metadata": map[string]any{"name": cq},
			"spec":     flavor,
		}},
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
			"metadata": map[string]any{"name": cq},
			"spec": map[string]any{
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: ns}},
				"resourceGroups": []any{map[string]any{
					"coveredResources": covered,
					"flavors":          []any{map[string]any{"name": cq, "resources": resources}},
				}},
			},
		}})
	for _, o := range objs {
		gvr := map[string]schema.GroupVersionResource{"Topology": TopologyGVR, "ResourceFlavor": ResourceFlavorGVR, "ClusterQueue": ClusterQueueGVR}[o.GetKind()]
		if _, err := c.Dynamic.Resource(gvr).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), cq, err)
		}
		t.Cleanup(func() {
			_ = c.Dynamic.Resource(gvr).Delete(context.Background(), o.GetName(), metav1.DeleteOptions{})
		})
	}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"clusterQueue": cq},
	}}
	if _, err := c.Dynamic.Resource(LocalQueueGVR).Namespace(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create LocalQueue %s/%s: %v", ns, name, err)
	}
	err := c.poll(ctx, time.Minute, "ClusterQueue "+cq+" to be active", func() (bool, error) {
		o, err := c.Dynamic.Resource(ClusterQueueGVR).Get(ctx, cq, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return conditionTrue(o, "Active"), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cq
}

// conditionTrue reports whether obj's status has condition typ with status True.
func conditionTrue(obj *unstructured.Unstructured, typ string) bool {
	var status struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if st, ok := obj.Object["status"].(map[string]any); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &status)
	}
	return meta.IsStatusConditionTrue(status.Conditions, typ)
}
