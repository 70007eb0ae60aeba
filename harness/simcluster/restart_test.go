package simcluster

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRestartKeepsState: etcd and the API server restarted with StartComponent
// keep their ports and data (an object made before is there after), the
// controllers carry on (a Job made after completes), and the audit log counts
// each create once, across the API server's restart.
func TestRestartKeepsState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	c, err := Start(ctx, Options{Audit: true, ControlPlaneOnly: true, Nodes: []NodeGroup{{CPUInstanceType, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Log(c.LogTails(40))
		}
		c.Stop()
	}()
	t0 := time.Now()
	step := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	step("started")
	ns := c.Namespace(t)
	before := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "before", Namespace: ns}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, before, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Etcd, APIServer} {
		if err := c.Restart(ctx, name); err != nil {
			t.Fatalf("restart %s: %v", name, err)
		}
		step("restarted " + name)
	}
	if err := c.StopComponent(APIServer); err != nil {
		t.Fatal(err)
	}
	if err := c.Exited(); err != nil {
		t.Errorf("a component stopped on purpose is reported as exited: %v", err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, before.Name, metav1.GetOptions{}); err == nil {
		t.Error("the API server answered while stopped")
	}
	step("stopped " + APIServer)
	if err := c.StartComponent(ctx, APIServer); err != nil {
		t.Fatal(err)
	}
	step("started " + APIServer)
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, before.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the object made before the restarts: %v", err)
	}

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			NodeSelector:  map[string]string{"node.kubernetes.io/instance-type": CPUInstanceType},
			Containers:    []corev1.Container{{Name: "main", Image: "example.com/x"}},
		}}},
	}
	if _, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = c.poll(ctx, 2*time.Minute, "Job after to complete", func() (bool, error) {
		j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	step("Job completed")
	creates, err := c.Creates(ns)
	if err != nil {
		t.Fatal(err)
	}
	jobs, pods := 0, 0
	for _, cr := range creates {
		t.Logf("audit: %+v", cr)
		switch {
		case cr.Resource == "jobs" && cr.Name == job.Name && cr.Code == 201:
			jobs++
		case cr.Resource == "pods" && cr.Code == 201 && cr.Labels[batchv1.JobNameLabel] == job.Name:
			pods++
		}
	}
	if jobs != 1 || pods != 1 {
		t.Errorf("the audit log has %d creates of Job %s and %d of pods; want 1 and 1 (labelled with the Job)", jobs, job.Name, pods)
	}
}
