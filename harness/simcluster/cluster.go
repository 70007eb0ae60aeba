package simcluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Options configure a cluster. The zero value starts everything with
// DefaultNodes.
type Options struct {
	// BinDir holds the built tools; "" uses BinDir().
	BinDir string
	// Nodes are the fake nodes to create; nil uses DefaultNodes().
	Nodes []NodeGroup
	// KeepDir leaves the state directory (logs, kubeconfig) in place after Stop.
	KeepDir bool
	// ControlPlaneOnly starts etcd, the API server, scheduler, controller
	// manager and kwok, without the JobSet and Argo controllers and their CRDs:
	// a quicker start, for tests that run Jobs only.
	ControlPlaneOnly bool
	// ControlPlane sizes kube-controller-manager's and kube-scheduler's
	// clients and the controller manager's workers; the zero value runs them
	// with their defaults. The load benchmarks use LoadControlPlane.
	ControlPlane ControlPlane
	// Audit has the API server write an audit log (Cluster.AuditLog) of every
	// create of a Job, JobSet, Service or pod, which Creates reads: tests count
	// with it what was created, through restarts of any component.
	Audit bool
	// ArgoRequeue is how long Argo's controller waits, after a change to a
	// Workflow or its pods, before it takes the Workflow up again
	// (DEFAULT_REQUEUE_TIME); 0 is DefaultArgoRequeue. Argo's own default,
	// which a deployment runs unless it sets one, is 10 s (ArgoDeployedRequeue).
	ArgoRequeue time.Duration
	// ArgoMinimalCRDs installs Argo's minimal CRDs, which its install
	// manifests apply by default (no schema: the API server validates and
	// prunes nothing in a Workflow), instead of its full CRDs, whose 3 MB
	// schema the test suite validates emitted objects against. Checking every
	// rewrite of a Workflow of hundreds of nodes against the full schema is
	// most of the API server's work in a run of thousands of steps.
	ArgoMinimalCRDs bool
}

// Argo's requeue times (Options.ArgoRequeue).
const (
	// DefaultArgoRequeue is the simulated cluster's: kwok finishes pods at
	// once, so for small flows a longer wait only adds to each step.
	DefaultArgoRequeue = time.Second
	// ArgoDeployedRequeue is Argo's default. Each time it takes a Workflow up
	// with a change, the controller rewrites the whole Workflow (its template
	// and every node's status): for flows of thousands of steps running at
	// once, 1 s makes those rewrites, not the steps, the cluster's work
	// (docs/performance.md).
	ArgoDeployedRequeue = 10 * time.Second
)

// Cluster is a running simulated cluster.
type Cluster struct {
	// Dir holds the cluster's state: etcd data, certificates, kubeconfig and logs.
	Dir string
	// Kubeconfig is a kubeconfig file for the cluster's administrator.
	Kubeconfig string
	// Config, Client and Dynamic reach the API server as its administrator.
	Config  *rest.Config
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	// Mapper maps kinds to resources, refreshed when a kind is not found.
	Mapper *restmapper.DeferredDiscoveryRESTMapper
	// Nodes are the fake nodes' names.
	Nodes []string
	// AuditLog is the API server's audit log when Options.Audit is set, else "".
	AuditLog string

	keepDir      bool
	argoRequeue  time.Duration // Options.ArgoRequeue
	argoCRDs     string        // the asset of Argo's CRDs (Options.ArgoMinimalCRDs)
	controlPlane ControlPlane  // Options.ControlPlane
	bin          string        // the tools' directory
	pki          *pki
	mu           sync.Mutex // guards procs while Kueue starts beside running tests
	procs        []*process
	kueue        struct {
		once sync.Once
		err  error
	}
	registry struct {
		once sync.Once
		r    *Registry
		err  error
	}
	sharedNode struct {
		once sync.Once
		n    *Node
		err  error
	}
	realNodes []*Node // guarded by mu
	argoExec  struct {
		once sync.Once
		err  error
	}
	cleanups []func()
	// held are the processes stopped on purpose (StopComponent), guarded by mu.
	held map[*process]bool
	// etcdURL and apiURL are where etcd and the API server answer.
	etcdURL, apiURL string
}

// Namespaces the controllers run in.
const (
	JobSetNamespace = "jobset-system"
	ArgoNamespace   = "argo"
)

// stateDirPrefix starts the name of each cluster's state directory, whose
// ownerFile holds the pid of the process that started the cluster.
const (
	stateDirPrefix = "manifold-simcluster-"
	ownerFile      = "owner.pid"
)

// removeStale removes the state directories of clusters whose starting process
// has died without cleaning up (a test binary that timed out; its programs died
// with it), and what their real nodes left: containers, shims, mounts, cgroups.
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), stateDirPrefix+"*"))
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(data))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			removeNodesOf(d)
			os.RemoveAll(d)
		}
	}
}

// adminToken authenticates the administrator (group system:masters).
const adminToken = "manifold-simcluster-admin"

// Start starts a cluster: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager, kwok, the JobSet controller with its webhooks and
// Argo's workflow-controller (not with Options.ControlPlaneOnly), all on free
// loopback ports; creates the fake nodes; and returns once the nodes are Ready
// and a pod has been scheduled and run. On error it stops what it started. Call
// Stop when done.
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	bin := o.BinDir
	if bin == "" {
		if bin, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if err := Ready(bin); err != nil {
		return nil, err
	}
	if err := o.ControlPlane.validate(); err != nil {
		return nil, err
	}
	nodes := o.Nodes
	if nodes == nil {
		nodes = DefaultNodes()
	}
	removeStale()
	dir, err := os.MkdirTemp("", stateDirPrefix)
	if err != nil {
		return nil, err
	}
	if !o.KeepDir { // a kept directory is the user's to remove
		if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return nil, err
		}
	}
	started := &Cluster{Dir: dir, keepDir: o.KeepDir, held: map[*process]bool{}, argoRequeue: o.ArgoRequeue, argoCRDs: "argo-crds", controlPlane: o.ControlPlane}
	if o.ArgoMinimalCRDs {
		started.argoCRDs = "argo-crds-minimal"
	}
	if started.argoRequeue == 0 {
		started.argoRequeue = DefaultArgoRequeue
	}
	if o.Audit {
		started.AuditLog = filepath.Join(dir, "logs", "audit.log")
	}
	c = started
	defer func() {
		// (c is nil here: the return that failed set it so.)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, started.LogTails(40))
			started.Stop()
		}
	}()
	if err := started.start(ctx, bin, nodes, o.ControlPlaneOnly); err != nil {
		return nil, err
	}
	return started, nil
}

func (c *Cluster) start(ctx context.Context, bin string, nodes []NodeGroup, controlPlaneOnly bool) error {
	pki, err := newPKI(c.Dir)
	if err != nil {
		return err
	}
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	etcdPort, peerPort, apiPort, webhookPort := ports[0], ports[1], ports[2], ports[3]
	c.bin, c.pki = bin, pki

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	c.etcdURL = etcdURL
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := c.run("etcd", []string{
		"--name=sim", "--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + etcdURL, "--advertise-client-urls=" + etcdURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=sim=" + peerURL,
		"--unsafe-no-fsync", "--log-level=warn",
	}); err != nil {
		return err
	}
	if err := c.waitComponent(ctx, Etcd); err != nil {
		return err
	}

	tokens := filepath.Join(c.Dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	apiURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	c.apiURL = apiURL
	audit, err := c.auditFlags()
	if err != nil {
		return err
	}
	if err := c.run("kube-apiserver", append(audit,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+pki.ServeCert, "--tls-private-key-file="+pki.ServeKey,
		"--cert-dir="+filepath.Join(c.Dir, "apiserver-certs"),
		"--token-auth-file="+tokens, "--client-ca-file="+pki.CACert,
		// Real nodes' kubelets are authorized as nodes; everyone else by RBAC. The
		// API server reaches a kubelet at its InternalIP (loopback), verifies its
		// serving certificate and shows its own client certificate.
		"--authorization-mode=Node,RBAC",
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--kubelet-certificate-authority="+pki.CACert,
		"--kubelet-client-certificate="+pki.KubeletClientCert, "--kubelet-client-key="+pki.KubeletClientKey,
		"--service-account-key-file="+pki.SAKey, "--service-account-signing-key-file="+pki.SAKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true", "--profiling=false",
	)); err != nil {
		return err
	}
	if err := c.waitComponent(ctx, APIServer); err != nil {
		return err
	}

	if err := c.connect(apiURL, pki.CAPEM); err != nil {
		return err
	}
	if c.Nodes, err = createNodes(ctx, c.Client, nodes); err != nil {
		return err
	}

	stages := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := writeStages(filepath.Join(bin, "assets"), stages); err != nil {
		return err
	}
	if err := c.run("kwok", []string{"--kubeconfig=" + c.Kubeconfig, "--config=" + stages,
		// kwok runs the fake nodes only: a real node (StartNode) is its kubelet's.
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=" + FakeNodeAnnotation + "=fake"}); err != nil {
		return err
	}
	if err := c.run("kube-scheduler", append([]string{"--kubeconfig=" + c.Kubeconfig, "--secure-port=0", "--leader-elect=false"},
		c.controlPlane.schedulerFlags()...)); err != nil {
		return err
	}
	if err := c.run("kube-controller-manager", append([]string{
		"--kubeconfig=" + c.Kubeconfig, "--secure-port=0", "--leader-elect=false",
		"--service-account-private-key-file=" + pki.SAKey, "--root-ca-file=" + pki.CACert,
		// kwok heartbeats every 20 to 45 seconds; the default grace (50s) is too
		// close to that for nodes to stay Ready on a busy machine.
		"--node-monitor-grace-period=5m",
	}, c.controlPlane.controllerManagerFlags()...)); err != nil {
		return err
	}

	if controlPlaneOnly {
		return c.waitReady(ctx)
	}
	if err := c.installCRDs(ctx, filepath.Join(bin, "assets"), "jobset-crds", c.argoCRDs); err != nil {
		return err
	}
	if err := c.startJobSet(ctx, webhookPort); err != nil {
		return err
	}
	if err := c.startArgo(ctx, apiPort); err != nil {
		return err
	}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	return c.waitArgo(ctx)
}

// run starts the tool name with args and env as a process of the cluster.
func (c *Cluster) run(name string, args []string, env ...string) error {
	p, err := start(c.Dir, name, filepath.Join(c.bin, name), args, env)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return nil
}

// processes returns the cluster's processes, oldest first.
func (c *Cluster) processes() []*process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.procs)
}

// connect writes the kubeconfig and makes the clients.
func (c *Cluster) connect(apiURL string, caPEM []byte) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["sim"] = &clientcmdapi.Cluster{Server: apiURL, CertificateAuthorityData: caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: adminToken}
	cfg.Contexts["sim"] = &clientcmdapi.Context{Cluster: "sim", AuthInfo: "admin", Namespace: "default"}
	cfg.CurrentContext = "sim"
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
		return err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 200, 400
	c.Config = rc
	if c.Client, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	if c.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return err
	}
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	return nil
}

// waitHTTP polls url until it answers 200, failing early if a process exits.
func (c *Cluster) waitHTTP(ctx context.Context, what, url string, client *http.Client) error {
	if client == nil {
		client = http.DefaultClient
	}
	return c.poll(ctx, time.Minute, what+" to answer "+url, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := client.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// poll calls cond every 100ms until it is true, an error, timeout, or a process of
// the cluster has exited.
func (c *Cluster) poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.Exited(); err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-tick.C:
		}
	}
}

// waitReady waits for every node to be Ready and untainted by the node lifecycle
// controller, for the default service account, and for a probe pod to be bound
// by the scheduler and run by kwok.
func (c *Cluster) waitReady(ctx context.Context) error {
	err := c.poll(ctx, 2*time.Minute, "the fake nodes to be Ready", func() (bool, error) {
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for i := range list.Items {
			if nodeReady(&list.Items[i]) {
				ready++
			}
		}
		return ready == len(c.Nodes), nil
	})
	if err != nil {
		return err
	}
	if err := c.WaitServiceAccount(ctx, "default"); err != nil {
		return err
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "simcluster-probe", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "probe", Image: "probe", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")},
			}}},
			NodeSelector: map[string]string{"node.kubernetes.io/instance-type": CPUInstanceType},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create probe pod: %w", err)
	}
	err = c.poll(ctx, time.Minute, "a probe pod to be scheduled and run", func() (bool, error) {
		p, err := c.Client.CoreV1().Pods("default").Get(ctx, probe.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Spec.NodeName != "" && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		return err
	}
	return c.Client.CoreV1().Pods("default").Delete(ctx, probe.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
}

// WaitServiceAccount waits until namespace ns has its default service account,
// which the controller-manager creates and pods need before they can be created.
func (c *Cluster) WaitServiceAccount(ctx context.Context, ns string) error {
	return c.poll(ctx, time.Minute, "the default service account of namespace "+ns, func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// Stop stops every process the cluster started, newest first, each by its pid
// (SIGTERM, then SIGKILL after 10 seconds), and removes the state directory
// unless Options.KeepDir was set.
func (c *Cluster) Stop() {
	c.mu.Lock()
	nodes := slices.Clone(c.realNodes)
	c.mu.Unlock()
	for _, n := range nodes {
		n.Stop()
	}
	for _, f := range c.cleanups {
		f()
	}
	procs := c.processes()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(10 * time.Second)
	}
	c.mu.Lock()
	c.procs = nil
	c.mu.Unlock()
	if !c.keepDir && c.Dir != "" {
		os.RemoveAll(c.Dir)
	}
}

// Exited returns an error naming each process of the cluster that has exited,
// but for those stopped on purpose (StopComponent).
func (c *Cluster) Exited() error {
	var errs []error
	for _, p := range c.processes() {
		c.mu.Lock()
		held := c.held[p]
		c.mu.Unlock()
		if err := p.exited(); err != nil && !held {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// LogTails returns the last n lines of each process's log.
func (c *Cluster) LogTails(n int) string { return logTails(c.processes(), n) }

// logTails returns the last n lines of each of procs' logs.
func logTails(procs []*process, n int) string {
	var b strings.Builder
	for _, p := range procs {
		data, err := os.ReadFile(p.log)
		if err != nil {
			fmt.Fprintf(&b, "=== %s: %v\n", p.name, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > n {
			lines = lines[len(lines)-n:]
		}
		fmt.Fprintf(&b, "=== %s (last %d lines of %s)\n%s\n", p.name, len(lines), p.log, strings.Join(lines, "\n"))
	}
	return b.String()
}
