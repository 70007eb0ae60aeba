package kube_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/internal/exampletest"
	"github.com/manifoldflow/manifold/runtimes/kube/simcluster"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// boundClaim creates, in ns, the claim name bound to a volume of its own, as a
// cluster's storage would: the scheduler places no pod whose claim is unbound.
func boundClaim(t *testing.T, c *simcluster.Cluster, ns, name string) {
	t.Helper()
	ctx := context.Background()
	size := resource.MustParse("1Ti")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data/" + name}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: ns, Name: name},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
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
		t.Fatal(err)
	}
}

// TestExamples runs the neuron-train and foreach example programs as a user
// would, `<flow> run --kube`, as Jobs and as JobSets.
func TestExamples(t *testing.T) {
	c := simcluster.Shared(t)
	bins := exampletest.Build(t)
	for _, name := range []string{"neuron-train", "foreach"} {
		for _, as := range []string{"job", "jobset"} {
			t.Run(name+"/"+as, func(t *testing.T) {
				ns := c.Namespace(t)
				if name == "neuron-train" {
					boundClaim(t, c, ns, "training-data")
				}
				dir := t.TempDir()
				cmd := exec.Command(bins[name], "run", "--kube", "--kubeconfig", c.Kubeconfig, "--namespace", ns, "--as", as, "--run-id", "example")
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				t.Logf("%s run --kube --as %s:\n%s", name, as, out)
				if err != nil {
					t.Fatalf("%s run --kube: %v", name, err)
				}
				rec, tasks, err := record.Read(filepath.Join(dir, record.DefaultRoot), "example")
				if err != nil {
					t.Fatal(err)
				}
				if rec.State != record.Succeeded || rec.Runtime != "kube" || rec.Namespace != ns {
					t.Errorf("recorded %s, runtime %q, namespace %q", rec.State, rec.Runtime, rec.Namespace)
				}
				for _, task := range tasks {
					if task.State != record.Succeeded || task.Node == "" {
						t.Errorf("%s: %s on node %q; want succeeded on a node", task.Label(), task.State, task.Node)
					}
				}
				if name == "neuron-train" {
					for _, task := range tasks {
						if task.Step == "train" && strings.Count(task.Node, "trn1-32xlarge-") != 2 {
							t.Errorf("train ran on %q; want two trn1.32xlarge nodes", task.Node)
						}
					}
				}
				if !strings.Contains(string(out), "run example succeeded") {
					t.Errorf("the output does not end the run as succeeded")
				}
				if left := labelled(t, c, ns, "example"); len(left) > 0 {
					t.Errorf("left on the cluster: %v", left)
				}
			})
		}
	}
}
