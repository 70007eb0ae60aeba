package simcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	cri "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/manifoldflow/manifold/provision/nodeshape"
)

// Real nodes run pods in real containers: containerd (Debian's, with runc and the
// CNI plugins) and a kubelet built with the control plane, each with its own
// state under the node's directory, its own sockets and loopback ports, and a
// cgroup of its own.
//
// Network: pods get their own network namespace on a bridge of the node's with
// no address and no route out (the CNI bridge plugin without a gateway or
// masquerading), so a pod reaches nothing but itself: every address it has is
// inside a namespace the harness made. The kubelet serves on 127.0.0.1 and the
// node's InternalIP is 127.0.0.1 (set by the harness, which acts as the node's
// cloud provider: the kubelet runs with --cloud-provider=external), so the API
// server reaches it on loopback for logs. Images come from the cluster's loopback
// Registry; containerd's proxy for anything else is a loopback listener that
// refuses.

// NodeOptions shape a real node.
type NodeOptions struct {
	// Name is the node's name; "real-<n>" when empty.
	Name string
	// InstanceType gives the node the labels, taints and extended resources of a
	// node of that type (package nodeshape); CPUInstanceType when empty.
	InstanceType string
	// Labels are added to the node's.
	Labels map[string]string
}

// Node is a real node of the cluster.
type Node struct {
	// Name is the node's name.
	Name string
	// Dir holds its state: containerd's root and state, the kubelet's root, logs.
	Dir string

	c          *Cluster
	sock       string // containerd's CRI socket
	cgroup     string // the kubelet's cgroup root, under every v1 hierarchy
	bridge     string
	proxy      *refusingProxy
	containerd *process
	kubelet    *process
	stopped    bool
}

// LabelRealNode marks the real nodes, for a pod's nodeSelector. They are also
// tainted with it (NoSchedule), so that only pods that tolerate it run there: the
// pods of tests written for kwok's nodes never land on a real one.
const LabelRealNode = "sim.manifold.dev/real-node"

// RealNodeToleration lets a pod run on a real node.
var RealNodeToleration = corev1.Toleration{Key: LabelRealNode, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// taintUninitialized is the taint a kubelet with --cloud-provider=external
// registers its node with, until its cloud provider (here, the harness) has
// initialized it.
const taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"

// StartNode starts a real node and returns once it is Ready and shaped. Stop it
// with Node.Stop (the cluster's Stop stops it too).
func (c *Cluster) StartNode(ctx context.Context, o NodeOptions) (_ *Node, err error) {
	reg, err := c.Registry(ctx)
	if err != nil {
		return nil, err
	}
	if o.InstanceType == "" {
		o.InstanceType = CPUInstanceType
	}
	shape, err := shapeOf(o.InstanceType)
	if err != nil {
		return nil, err
	}
	// The node's index (its default name, bridge and pod subnet) is taken with
	// its place among the cluster's real nodes, so two nodes never share one.
	n := &Node{c: c}
	c.mu.Lock()
	index := len(c.realNodes)
	c.realNodes = append(c.realNodes, n)
	c.mu.Unlock()
	if o.Name == "" {
		o.Name = "real-" + strconv.Itoa(index)
	}
	n.Name, n.Dir = o.Name, filepath.Join(c.Dir, "nodes", o.Name)
	n.cgroup = "/" + nodeCgroupPrefix(c.Dir) + o.Name
	n.bridge = fmt.Sprintf("msim%d-%d", os.Getpid()%10000, index)
	n.sock = filepath.Join(n.Dir, "containerd", "containerd.sock")
	defer func() {
		if err != nil {
			err = fmt.Errorf("real node %s: %w\n%s", n.Name, err, n.logTails(30))
			n.Stop()
		}
	}()
	// The bridge's name is kept, for removeNodesOf to find after a crash.
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(n.Dir, "bridge"), []byte(n.bridge), 0o644); err != nil {
		return nil, err
	}
	if n.proxy, err = startRefusingProxy(); err != nil {
		return nil, err
	}
	if err := n.startContainerd(reg, index); err != nil {
		return nil, err
	}
	if err := n.startKubelet(ctx, o, shape); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) startContainerd(reg *Registry, index int) error {
	dir := filepath.Join(n.Dir, "containerd")
	hosts := filepath.Join(dir, "certs.d")
	for _, h := range append(slices.Clone(MirroredHosts), reg.Host) {
		d := filepath.Join(hosts, h)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(d, "hosts.toml"), []byte(hostsToml(reg.Host)), 0o644); err != nil {
			return err
		}
	}
	cniConf := filepath.Join(dir, "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	conflist := map[string]any{
		"cniVersion": "0.4.0",
		"name":       "sim-" + n.Name,
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": n.bridge, "isGateway": false, "ipMasq": false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  []any{[]any{map[string]any{"subnet": fmt.Sprintf("10.244.%d.0/24", index)}}},
				"dataDir": filepath.Join(dir, "ipam"),
			},
		}},
	}
	data, err := json.MarshalIndent(conflist, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-sim.conflist"), data, 0o644); err != nil {
		return err
	}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_cdi = false
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), n.sock, n.sock+".ttrpc", filepath.Join(dir, "opt"), PauseImage, cniConf, hosts)
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		return fmt.Errorf("%w: install Debian's containerd, runc and containernetworking-plugins", err)
	}
	p, err := start(n.Dir, "containerd", bin, []string{"--config", path}, []string{
		"HTTP_PROXY=" + n.proxy.URL(), "HTTPS_PROXY=" + n.proxy.URL(), "NO_PROXY=127.0.0.1,localhost",
		"http_proxy=" + n.proxy.URL(), "https_proxy=" + n.proxy.URL(), "no_proxy=127.0.0.1,localhost",
	})
	if err != nil {
		return err
	}
	n.containerd = p
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := p.exited(); err != nil {
			return err
		}
		if conn, err := n.cri(); err == nil {
			_, verr := cri.NewRuntimeServiceClient(conn).Version(context.Background(), &cri.VersionRequest{})
			conn.Close()
			if verr == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("containerd did not answer on its socket within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cri dials containerd's CRI socket.
func (n *Node) cri() (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+n.sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

func (n *Node) startKubelet(ctx context.Context, o NodeOptions, shape nodeshape.Shape) error {
	c := n.c
	dir := filepath.Join(n.Dir, "kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cert, key, err := c.pki.clientCert("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster: {server: %q, certificate-authority: %q}
users:
- name: node
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: sim
  context: {cluster: sim, user: node}
current-context: sim
`, c.Config.Host, c.pki.CACert, cert, key)
	if err := os.WriteFile(kubeconfig, []byte(kc), 0o600); err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	// Each node keeps its pods' logs apart: a kubelet's garbage collection
	// removes every directory of the pod logs directory whose pod it does not
	// run, and the real nodes of tests run side by side on this machine.
	podLogs, err := filepath.Abs(filepath.Join(dir, "pod-logs"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(podLogs, 0o755); err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %q
tlsPrivateKeyFile: %q
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization:
  mode: Webhook
cgroupDriver: cgroupfs
cgroupRoot: %q
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: %q
imageServiceEndpoint: %q
resolvConf: ""
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
serializeImagePulls: false
registerNode: true
nodeStatusUpdateFrequency: 10s
maxPods: 110
podLogsDir: %q
`, ports[0], ports[1], c.pki.ServeCert, c.pki.ServeKey, c.pki.CACert, n.cgroup, "unix://"+n.sock, "unix://"+n.sock, podLogs)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		return err
	}
	if err := n.createCgroups(); err != nil {
		return err
	}
	p, err := start(n.Dir, "kubelet", filepath.Join(c.bin, "kubelet"), []string{
		"--config=" + path, "--kubeconfig=" + kubeconfig, "--root-dir=" + filepath.Join(dir, "root"),
		"--cert-dir=" + filepath.Join(dir, "pki"), "--hostname-override=" + n.Name, "--cloud-provider=external",
		"--v=1",
	}, nil)
	if err != nil {
		return err
	}
	n.kubelet = p

	// The harness is the node's cloud provider: once the node registers, it gets
	// its loopback address, loses the uninitialized taint, and gets its shape.
	err = c.poll(ctx, 2*time.Minute, "real node "+n.Name+" to register", func() (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		_, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return err
	}
	status, err := json.Marshal(map[string]any{"status": map[string]any{"addresses": []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}})
	if err != nil {
		return err
	}
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("setting its address: %w", err)
	}
	// The shape, and the real-node label and taint, come first: the node is never
	// schedulable without the taint that keeps kwok's pods off it.
	shape.Labels = maps.Clone(shape.Labels)
	maps.Copy(shape.Labels, o.Labels)
	shape.Labels[LabelRealNode], shape.Labels[corev1.LabelTopologyZone] = "true", Zone
	shape.Taints = append(slices.Clone(shape.Taints), corev1.Taint{Key: LabelRealNode, Value: "true", Effect: corev1.TaintEffectNoSchedule})
	if err := nodeshape.Apply(ctx, c.Client.CoreV1().Nodes(), n.Name, shape); err != nil {
		return fmt.Errorf("shaping it: %w", err)
	}
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == taintUninitialized
		})
		_, err = c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("initializing it: %w", err)
	}
	return c.poll(ctx, 2*time.Minute, "real node "+n.Name+" to be Ready", func() (bool, error) {
		if err := p.exited(); err != nil {
			return false, err
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return nodeReady(node), nil
	})
}

// Stop stops the node and removes everything it made: its pods' sandboxes and
// containers (through the CRI, so their network namespaces go too), containerd
// and its shims, its mounts, its cgroups, its bridge, its Node object and its
// directory. It returns what it could not remove.
func (n *Node) Stop() error {
	if n.stopped {
		return nil
	}
	n.stopped = true
	var errs []error
	if n.kubelet != nil {
		n.kubelet.stop(10 * time.Second)
	}
	if n.containerd != nil && n.containerd.exited() == nil {
		if err := n.removeSandboxes(); err != nil {
			errs = append(errs, err)
		}
		n.containerd.stop(10 * time.Second)
	}
	errs = append(errs, n.killShims()...)
	errs = append(errs, n.unmount()...)
	errs = append(errs, n.removeCgroups()...)
	if err := deleteBridge(n.bridge); err != nil {
		errs = append(errs, err)
	}
	if n.proxy != nil {
		n.proxy.close()
	}
	if n.c.Client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = n.c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		cancel()
	}
	if err := os.RemoveAll(n.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeSandboxes stops and removes every pod sandbox (and so every container)
// containerd runs for the node.
func (n *Node) removeSandboxes() error {
	conn, err := n.cri()
	if err != nil {
		return err
	}
	defer conn.Close()
	rs := cri.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := rs.ListPodSandbox(ctx, &cri.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing the pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := rs.StopPodSandbox(ctx, &cri.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Metadata.GetName(), err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &cri.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.Metadata.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// ImportImage imports the image archive (docker save, or an OCI image
// tarball) into the node's containerd, where its kubelet finds images, as
// `kind load image-archive` does on each kind node.
func (n *Node) ImportImage(archive string) error {
	out, err := exec.Command("ctr", "--address", n.sock, "--namespace", "k8s.io", "images", "import", "--all-platforms", "--digests", archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s into node %s: %w\n%s", archive, n.Name, err, out)
	}
	return nil
}

// Processes returns the pids of the processes that belong to the node: its
// containerd, kubelet and shims, and the containers' processes.
func (n *Node) Processes() []int { return processesOf(n.Dir, n.cgroup) }

// processesOf returns the pids of the processes whose command line names dir or
// whose cgroup is under cgroup.
func processesOf(dir, cgroup string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cg, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
		if strings.Contains(string(cmdline), dir) || strings.Contains(string(cg), cgroup) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killShims kills what is left of the node's processes: containerd's shims
// outlive it.
func (n *Node) killShims() []error { return killAll(n.Dir, n.cgroup) }

// killAll kills the processes of processesOf(dir, cgroup) and waits, for at most
// 10 seconds, until they are gone.
func killAll(dir, cgroup string) []error {
	pids := processesOf(dir, cgroup)
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		pids = processesOf(dir, cgroup)
	}
	if len(pids) > 0 {
		return []error{fmt.Errorf("processes of %s still running: %v", dir, pids)}
	}
	return nil
}

// Mounts returns the mount points under the node's directory, deepest first.
func (n *Node) Mounts() []string { return mountsUnder(n.Dir) }

// mountsUnder returns the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
	return mounts
}

func (n *Node) unmount() []error { return unmountUnder(n.Dir) }

// unmountUnder detaches every mount under dir.
func unmountUnder(dir string) []error {
	var errs []error
	for _, m := range mountsUnder(dir) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	return errs
}

// Cgroups returns the node's cgroup directories that exist, one per hierarchy.
func (n *Node) Cgroups() []string { return cgroupsNamed(strings.TrimPrefix(n.cgroup, "/")) }

// cgroupsNamed returns the top-level cgroups matching pattern, in every
// hierarchy.
func cgroupsNamed(pattern string) []string {
	dirs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", pattern))
	top, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", pattern))
	return append(dirs, top...)
}

// createCgroups makes the kubelet's cgroup root in every v1 hierarchy (and in
// the v2 one, when there is one), as the kubelet asks it to exist.
func (n *Node) createCgroups() error {
	rel := strings.TrimPrefix(n.cgroup, "/")
	if exists("/sys/fs/cgroup/cgroup.controllers") { // unified
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", rel), 0o755)
	}
	hierarchies, _ := filepath.Glob("/sys/fs/cgroup/*/cgroup.procs")
	for _, procs := range hierarchies {
		h := filepath.Dir(procs)
		d := filepath.Join(h, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("making cgroup %s: %w", d, err)
		}
		if filepath.Base(h) == "cpuset" { // a cpuset cgroup holds no task until it has cpus and mems
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", d, err)
				}
			}
		}
	}
	return nil
}

func (n *Node) removeCgroups() []error { return removeCgroups(n.Cgroups()) }

// removeCgroups removes the cgroup directories roots and every cgroup below them.
func removeCgroups(roots []string) []error {
	var errs []error
	for _, root := range roots {
		var dirs []string
		filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs) // children first
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errs
}

// nodeCgroupPrefix starts the cgroup names of the real nodes of the cluster kept
// in dir.
func nodeCgroupPrefix(dir string) string { return "manifold-sim-" + filepath.Base(dir) + "-" }

// removeNodesOf removes what the real nodes of a cluster whose process died left
// under dir: their processes (shims and containers), mounts and cgroups.
func removeNodesOf(dir string) {
	nodes := filepath.Join(dir, "nodes")
	if !exists(nodes) {
		return
	}
	killAll(nodes, "/"+nodeCgroupPrefix(dir))
	unmountUnder(nodes)
	removeCgroups(cgroupsNamed(nodeCgroupPrefix(dir) + "*"))
	files, _ := filepath.Glob(filepath.Join(nodes, "*", "bridge"))
	for _, f := range files {
		if name, err := os.ReadFile(f); err == nil {
			deleteBridge(string(name))
		}
	}
}

// deleteBridge deletes the network bridge name, if it exists.
func deleteBridge(name string) error {
	if name == "" {
		return nil
	}
	out, err := exec.Command("ip", "link", "delete", name).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Cannot find device") {
		return fmt.Errorf("deleting bridge %s: %v: %s", name, err, out)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// logTails returns the last lines of the node's logs.
func (n *Node) logTails(lines int) string {
	var procs []*process
	for _, p := range []*process{n.containerd, n.kubelet} {
		if p != nil {
			procs = append(procs, p)
		}
	}
	return logTails(procs, lines)
}
