package simcluster

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StartTimeout bounds a cluster's start in tests.
const StartTimeout = 5 * time.Minute

var shared struct {
	once sync.Once
	c    *Cluster
	err  error
}

// Shared returns the one cluster of this test binary, starting it on first use,
// so the tests of a package share one start. The package's TestMain must call
// Main, which stops it. Missing tools fail t with how to build them.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
		defer cancel()
		shared.c, shared.err = Start(ctx, Options{})
	})
	if shared.err != nil {
		t.Fatalf("simulated cluster: %v", shared.err)
	}
	if err := shared.c.Exited(); err != nil {
		t.Fatalf("simulated cluster: %v", err)
	}
	return shared.c
}

// Dedicated starts a cluster of t's own with o, stopped when t ends: for a
// benchmark that needs the cluster's components set otherwise than the shared
// cluster's (Options.ArgoRequeue), or the machine to itself.
func Dedicated(t testing.TB, o Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("simulated cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("simulated cluster logs:\n%s", c.LogTails(100))
		}
		c.Stop()
	})
	return c
}

// Main runs the tests of m, then stops the shared cluster if one was started,
// printing its processes' logs when a test failed. Use it as
// `func TestMain(m *testing.M) { os.Exit(simcluster.Main(m)) }`.
func Main(m *testing.M) int {
	code := m.Run()
	if c := shared.c; c != nil {
		if code != 0 {
			fmt.Fprintf(os.Stderr, "simulated cluster logs:\n%s", c.LogTails(100))
		}
		c.Stop()
	}
	return code
}

// Namespace creates a namespace of its own for t, waits until pods can be
// created in it, and deletes it when t ends.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	return c.namespace(t, nil)
}

// LabelledNamespace creates a namespace for t with labels (such as a Pod
// Security level, pod-security.kubernetes.io/enforce), as Namespace does.
func (c *Cluster) LabelledNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	return c.namespace(t, labels)
}

// KueueNamespace starts Kueue (StartKueue) if it is not running, then creates a
// namespace for t whose Jobs, JobSets and pods Kueue manages, as Namespace does.
func (c *Cluster) KueueNamespace(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	if err := c.StartKueue(ctx); err != nil {
		t.Fatal(err)
	}
	return c.namespace(t, map[string]string{LabelKueue: "true"})
}

func (c *Cluster) namespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	ctx := context.Background()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "t-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	if err := c.WaitServiceAccount(ctx, ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// BoundClaim creates, in namespace ns, the PersistentVolumeClaim name bound to a
// volume of its own, as a cluster's storage would provide it (the scheduler places
// no pod whose claim is unbound), returns once it is Bound, and deletes the
// volume when t ends.
func (c *Cluster) BoundClaim(t testing.TB, ns, name string) {
	t.Helper()
	c.HostPathClaim(t, ns, name, "/data/"+name)
}

// HostPathClaim is BoundClaim with the volume at hostPath: on a real node
// (StartNode) the pods mounting the claim share that directory of this machine.
func (c *Cluster) HostPathClaim(t testing.TB, ns, name, hostPath string) {
	t.Helper()
	ctx := context.Background()
	size := resource.MustParse("1Ti")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: hostPath}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create volume for claim %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: new(""),
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create claim %s: %v", name, err)
	}
	// The controller manager binds the two; until it has, the scheduler places
	// no pod that mounts the claim, and a busy machine can take seconds.
	err := c.poll(ctx, time.Minute, "claim "+name+" to be bound", func() (bool, error) {
		got, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// RealNode returns the cluster's shared real node (StartNode with the default
// options), starting it the first time; the cluster's Stop stops it.
func (c *Cluster) RealNode(t testing.TB) *Node {
	t.Helper()
	c.sharedNode.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		c.sharedNode.n, c.sharedNode.err = c.StartNode(ctx, NodeOptions{})
	})
	if c.sharedNode.err != nil {
		t.Fatalf("real node: %v", c.sharedNode.err)
	}
	return c.sharedNode.n
}

// PushBusybox is Registry.PushBusybox on the cluster's loopback registry, for
// Command steps on real nodes.
func (c *Cluster) PushBusybox(t testing.TB, ref string) {
	t.Helper()
	ctx := context.Background()
	reg, err := c.Registry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.PushBusybox(ctx, ref); err != nil {
		t.Fatal(err)
	}
}

// ArgoExecutor readies namespace ns for Workflows whose pods run on a real node:
// Argo's executor image in the loopback registry (once per cluster), and for the
// namespace's default service account, which the pods run as, what the executor
// asks of the API server (Argo's documented executor role: create and patch
// WorkflowTaskResults).
func (c *Cluster) ArgoExecutor(t testing.TB, ns string) {
	t.Helper()
	ctx := context.Background()
	c.argoExec.once.Do(func() {
		reg, err := c.Registry(ctx)
		if err != nil {
			c.argoExec.err = err
			return
		}
		img, err := argoExecImage(c.bin)
		if err != nil {
			c.argoExec.err = err
			return
		}
		c.argoExec.err = reg.Push(ctx, ArgoExecImage, img)
	})
	if c.argoExec.err != nil {
		t.Fatalf("Argo's executor image: %v", c.argoExec.err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"argoproj.io"}, Resources: []string{"workflowtaskresults"}, Verbs: []string{"create", "patch"},
		}},
	}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "argo-executor", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ArgoParent readies namespace ns for a split flow's parent Workflow, whose
// resource templates create the parts' Workflows through Argo's executor,
// which must really run (kwok would "complete" their pods at once, creating
// nothing): the cluster's real node and Argo's executor (ArgoExecutor), and
// for the namespace's default service account, which the executor runs as,
// rules (emit/argo's ParentRules: what the parent's executor asks of the API
// server). A parent's WorkflowTemplate is then placed with OnRealNode.
func (c *Cluster) ArgoParent(t testing.TB, ns string, rules []rbacv1.PolicyRule) {
	t.Helper()
	c.RealNode(t)
	c.ArgoExecutor(t, ns)
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "manifold-parent", Namespace: ns}, Rules: rules}
	if _, err := c.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "manifold-parent", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
	}
	if _, err := c.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// OnRealNode places the pods of the Workflow or WorkflowTemplate spec (its
// "spec" map) on the cluster's real node, in the node's network, where Argo's
// executor reaches the API server on loopback: as a cluster's operator would
// set a workflow default.
func OnRealNode(spec map[string]any) {
	spec["nodeSelector"] = map[string]any{LabelRealNode: "true"}
	spec["tolerations"] = []any{map[string]any{"key": LabelRealNode, "operator": "Exists", "effect": "NoSchedule"}}
	spec["podSpecPatch"] = `{"hostNetwork":true}`
}
