package simcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRealNode: a real node joins beside the fake ones, runs a pod in a real
// container from an image of the loopback registry (its output read back
// through the API server, its exit code the container's), gives the pod an
// address only inside a network namespace of its own, never fetches an image
// from elsewhere, and leaves nothing behind when stopped: no process, mount,
// cgroup, bridge, network namespace, directory or Node.
func TestRealNode(t *testing.T) {
	c := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	netnsBefore := netns()
	n, err := c.StartNode(ctx, NodeOptions{Name: "real-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop() })
	node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[LabelRealNode] != "true" || node.Labels[corev1.LabelInstanceTypeStable] != CPUInstanceType {
		t.Errorf("real node labels %v", node.Labels)
	}
	if _, ok := node.Annotations[FakeNodeAnnotation]; ok {
		t.Error("the real node carries kwok's annotation")
	}

	c.PushBusybox(t, "busybox:1.37")
	ns := c.Namespace(t)
	pod := func(name, image string, command ...string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName:      n.Name,
				Tolerations:   []corev1.Toleration{RealNodeToleration},
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: image, Command: command}},
			},
		}
	}
	p := pod("real", "busybox:1.37", "sh", "-c", "echo hello from a real container; sleep 1; exit 3")
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	err = c.poll(ctx, 2*time.Minute, "the real pod to end", func() (bool, error) {
		got, err = c.Client.CoreV1().Pods(ns).Get(ctx, "real", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Status.Phase == corev1.PodFailed || got.Status.Phase == corev1.PodSucceeded, nil
	})
	if err != nil {
		t.Fatalf("%v\npod status: %+v\n%s", err, got.Status, n.logTails(40))
	}
	if st := got.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 3 {
		t.Errorf("container status %+v, want terminated with exit code 3", st)
	}
	logs, err := c.Client.CoreV1().Pods(ns).GetLogs("real", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || strings.TrimSpace(string(logs)) != "hello from a real container" {
		t.Errorf("logs %q, %v", logs, err)
	}
	// The pod's address is on the node's bridge, inside the pod's own network
	// namespace: never a host address.
	if ip := net.ParseIP(got.Status.PodIP); ip == nil || !(&net.IPNet{IP: net.IPv4(10, 244, 0, 0), Mask: net.CIDRMask(16, 32)}).Contains(ip) {
		t.Errorf("pod IP %q, want one of the node's bridge (10.244.0.0/16)", got.Status.PodIP)
	}

	// An image of a registry that is not mirrored is refused on loopback.
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod("elsewhere", "registry.example.com/team/app:1", "true"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = c.poll(ctx, time.Minute, "the pull from an unmirrored registry to fail", func() (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "elsewhere", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, s := range p.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil && (w.Reason == "ErrImagePull" || w.Reason == "ImagePullBackOff") {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if asked := n.proxy.Asked(); !slices.ContainsFunc(asked, func(h string) bool { return strings.HasPrefix(h, "registry.example.com") }) {
		t.Errorf("the refusing proxy saw %v, want registry.example.com", asked)
	}

	if err := n.Stop(); err != nil {
		t.Fatalf("stopping the node: %v", err)
	}
	if pids := n.Processes(); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	if m := n.Mounts(); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if cg := n.Cgroups(); len(cg) > 0 {
		t.Errorf("cgroups left: %v", cg)
	}
	if _, err := os.Stat(n.Dir); !os.IsNotExist(err) {
		t.Errorf("the node's directory is still there (%v)", err)
	}
	if out, err := exec.Command("ip", "link", "show", n.bridge).CombinedOutput(); err == nil {
		t.Errorf("bridge %s left: %s", n.bridge, out)
	}
	if left := slices.DeleteFunc(netns(), func(s string) bool { return slices.Contains(netnsBefore, s) }); len(left) > 0 {
		t.Errorf("network namespaces left: %v", left)
	}
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Node object is still there (%v)", err)
	}
}

// netns lists the named network namespaces (CNI's, under /var/run/netns).
func netns() []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// crashEnv makes the test binary start a cluster with a real node running a
// pod, print the cluster's directory and exit without stopping anything, as a
// test binary does when it times out or crashes.
const crashEnv = "MANIFOLD_SIMCLUSTER_CRASH_HELPER"

func crashHelper() {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(1)
	}
	c, err := Start(ctx, Options{Nodes: []NodeGroup{{CPUInstanceType, 1}}})
	if err != nil {
		fail(err)
	}
	n, err := c.StartNode(ctx, NodeOptions{})
	if err != nil {
		fail(err)
	}
	reg, err := c.Registry(ctx)
	if err != nil {
		fail(err)
	}
	if err := reg.PushBusybox(ctx, "busybox:1.37"); err != nil {
		fail(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "left", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: n.Name, Tolerations: []corev1.Toleration{RealNodeToleration},
			Containers: []corev1.Container{{Name: "main", Image: "busybox:1.37", Command: []string{"sleep", "600"}}}},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		fail(err)
	}
	err = c.poll(ctx, 2*time.Minute, "the pod to run", func() (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, "left", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		fail(err)
	}
	fmt.Println(c.Dir)
	os.Exit(0) // no cleanup
}

// TestCrashedNodeRemoved: a test binary that dies with a real node running a
// container leaves containerd's shims, the container, its mounts, cgroups and
// bridge behind; the next cluster to start removes them all with the directory.
func TestCrashedNodeRemoved(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	dir := lines[len(lines)-1]
	if !strings.HasPrefix(filepath.Base(dir), stateDirPrefix) {
		t.Fatalf("helper printed %q", out)
	}
	nodes, cgroup := filepath.Join(dir, "nodes"), "/"+nodeCgroupPrefix(dir)
	bridge, err := os.ReadFile(filepath.Join(nodes, "real-0", "bridge"))
	if err != nil {
		t.Fatal(err)
	}
	// What the crash left: the container and its shim, still running.
	if pids := processesOf(nodes, cgroup); len(pids) == 0 {
		t.Fatal("the crashed node left no process: nothing to remove, the test proves nothing")
	}
	if len(mountsUnder(dir)) == 0 {
		t.Fatal("the crashed node left no mount: nothing to remove, the test proves nothing")
	}
	removeStale()
	if pids := processesOf(nodes, cgroup); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	if m := mountsUnder(dir); len(m) > 0 {
		t.Errorf("mounts left: %v", m)
	}
	if cg := cgroupsNamed(nodeCgroupPrefix(dir) + "*"); len(cg) > 0 {
		t.Errorf("cgroups left: %v", cg)
	}
	if out, err := exec.Command("ip", "link", "show", string(bridge)).CombinedOutput(); err == nil {
		t.Errorf("bridge %s left: %s", bridge, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the crashed cluster's directory is still there (%v)", err)
	}
}
