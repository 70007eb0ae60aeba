package simcluster

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// installCRDs creates the CRDs of each of dirs under assetDir (with create, not a
// client-side apply: Argo's full CRDs exceed the last-applied annotation's size
// limit) and waits until each is established.
func (c *Cluster) installCRDs(ctx context.Context, assetDir string, dirs ...string) error {
	var names []string
	for _, d := range dirs {
		files, err := filepath.Glob(filepath.Join(assetDir, d, "*.yaml"))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("no CRDs in %s", filepath.Join(assetDir, d))
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			objs, err := Decode(data)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			for _, o := range objs {
				if o.GetKind() != "CustomResourceDefinition" {
					continue
				}
				if _, err := c.Dynamic.Resource(crdGVR).Create(ctx, o, metav1.CreateOptions{}); err != nil {
					return fmt.Errorf("create CRD %s: %w", o.GetName(), err)
				}
				names = append(names, o.GetName())
			}
		}
	}
	for _, name := range names {
		err := c.poll(ctx, time.Minute, "CRD "+name+" to be established", func() (bool, error) {
			crd, err := c.Dynamic.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return conditionTrue(crd, "Established"), nil
		})
		if err != nil {
			return err
		}
	}
	c.Mapper.Reset()
	return nil
}

func (c *Cluster) createNamespace(ctx context.Context, name string) error {
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// startJobSet runs the JobSet controller with its webhook server on 127.0.0.1:port
// (serving the cluster's certificate; metrics and health probes off), then
// registers its JobSet webhooks by URL. Without the webhooks JobSets lack their
// defaults and the controller fails on them. The pod webhooks are left out: they
// would put every pod creation in the cluster behind the controller, and what
// they check (exclusive placement annotations) is not what the tests rely on.
func (c *Cluster) startJobSet(ctx context.Context, port int) error {
	if err := c.createNamespace(ctx, JobSetNamespace); err != nil {
		return err
	}
	path, err := c.managerConfig("jobset", "config.jobset.x-k8s.io/v1alpha1", port, "")
	if err != nil {
		return err
	}
	if err := c.run("jobset-controller", []string{"--config=" + path, "--kubeconfig=" + c.Kubeconfig, "--zap-log-level=info"},
		"POD_NAMESPACE="+JobSetNamespace, "KUBECONFIG="+c.Kubeconfig); err != nil {
		return err
	}
	return c.registerWebhooks(ctx, "jobset", port, func(path string) (keep bool, selector map[string]any) {
		return strings.Contains(path, "jobset"), nil
	})
}

// managerConfig writes the configuration file of controller name, a
// controller-runtime manager whose Configuration kind is of apiVersion: no leader
// election, its webhook server on 127.0.0.1:port with the cluster's serving
// certificate, metrics and health probes off, and then extra (YAML of the same
// document). It returns the file's path.
func (c *Cluster) managerConfig(name, apiVersion string, port int, extra string) (string, error) {
	config := fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  host: 127.0.0.1
  port: %d
  certDir: %s
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: "0"
`, apiVersion, port, c.pki.ServingDir) + extra
	path := filepath.Join(c.Dir, name+"-config.yaml")
	return path, os.WriteFile(path, []byte(config), 0o644)
}

// registerWebhooks waits for the webhook server of controller name on
// 127.0.0.1:port, then creates the webhook configurations of its
// assets/<name>-webhook/manifests.yaml, calling the server by URL with the
// cluster's CA, named "<name>-<configuration>". keep chooses the webhooks to
// register by their path, and gives the namespace selector of each (nil for the
// manifest's own).
func (c *Cluster) registerWebhooks(ctx context.Context, name string, port int, keep func(path string) (bool, map[string]any)) error {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	err := c.poll(ctx, time.Minute, "the "+name+" webhook server on "+addr, func() (bool, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(c.bin, "assets", name+"-webhook", "manifests.yaml"))
	if err != nil {
		return err
	}
	configs, err := Decode(data)
	if err != nil {
		return err
	}
	for _, cfg := range configs {
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		var kept []any
		for _, h := range hooks {
			m, _ := h.(map[string]any)
			path, _, _ := unstructured.NestedString(m, "clientConfig", "service", "path")
			ok, selector := keep(path)
			if !ok {
				continue
			}
			m["clientConfig"] = map[string]any{"url": "https://" + addr + path, "caBundle": base64.StdEncoding.EncodeToString(c.pki.CAPEM)}
			if selector != nil {
				m["namespaceSelector"] = selector
			}
			kept = append(kept, m)
		}
		if len(kept) == 0 {
			return fmt.Errorf("%s has no %s webhooks", cfg.GetName(), name)
		}
		if err := unstructured.SetNestedSlice(cfg.Object, kept, "webhooks"); err != nil {
			return err
		}
		cfg.SetName(name + "-" + cfg.GetName())
		if _, err := c.Create(ctx, cfg, ""); err != nil {
			return err
		}
	}
	return nil
}

// ArgoExecutorSecurity is the executor part of the workflow-controller's
// ConfigMap that lets Argo's own init and wait containers (and a resource
// template's main container) run in a namespace at Pod Security's restricted
// level. The controller gives them executor.securityContext as it is; unset,
// they get none, except a resource template's, which get MinimalCtrSC (these
// values and a read-only root). 8737 is the argoexec image's own user.
const ArgoExecutorSecurity = "securityContext:\n" +
	"  runAsNonRoot: true\n" +
	"  runAsUser: 8737\n" +
	"  allowPrivilegeEscalation: false\n" +
	"  capabilities:\n    drop: [ALL]\n" +
	"  seccompProfile:\n    type: RuntimeDefault\n"

// startArgo runs Argo's workflow-controller for all namespaces, its metrics
// server off, re-examining a changed Workflow after Options.ArgoRequeue (1 s
// unless set, instead of Argo's 10: kwok finishes pods at once, so for small
// flows the default only adds waiting), with client
// limits of 100 requests a second (bursts of 200). (It also serves
// /healthz on the fixed port 6060; when that port is taken it only logs so.)
//
// Its executor (ArgoExecImage, pushed by ArgoExecutor for real nodes) reaches the
// API server the way a pod in the node's network does here: at 127.0.0.1 and the
// API server's port, given as KUBERNETES_SERVICE_HOST and _PORT (the cluster runs
// no service proxy; a container's own variables win over the kubelet's), and
// runs as ArgoExecutorSecurity says.
func (c *Cluster) startArgo(ctx context.Context, apiPort int) error {
	if err := c.createNamespace(ctx, ArgoNamespace); err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "workflow-controller-configmap", Namespace: ArgoNamespace},
		Data: map[string]string{
			"metricsConfig":   "enabled: false\n",
			"telemetryConfig": "enabled: false\n",
			"executor": "env:\n" +
				"- name: KUBERNETES_SERVICE_HOST\n  value: 127.0.0.1\n" +
				"- name: KUBERNETES_SERVICE_PORT\n  value: \"" + strconv.Itoa(apiPort) + "\"\n" +
				ArgoExecutorSecurity,
		},
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ArgoNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	return c.run("workflow-controller", []string{
		"--kubeconfig=" + c.Kubeconfig, "--namespace=" + ArgoNamespace,
		"--executor-image=" + ArgoExecImage,
		// Client limits raised from Argo's defaults (20 and 30) as a large
		// install raises them, for flows of thousands of steps.
		"--qps=100", "--burst=200",
	}, "LEADER_ELECTION_DISABLE=true", "DEFAULT_REQUEUE_TIME="+c.argoRequeue.String(), "KUBECONFIG="+c.Kubeconfig)
}

// waitArgo waits until Argo's controller runs Workflows from WorkflowTemplates:
// a Workflow submitted before its informers have seen a template ends in Error
// ("workflowtemplates … not found"), so a probe template with one suspend step
// that resumes at once is submitted until a Workflow of it succeeds.
func (c *Cluster) waitArgo(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	const probe = "simcluster-probe"
	tmpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
		"metadata": map[string]any{"name": probe},
		"spec": map[string]any{
			"entrypoint": "resume",
			"templates":  []any{map[string]any{"name": "resume", "suspend": map[string]any{"duration": "0"}}},
		},
	}}
	if _, err := c.Create(ctx, tmpl, ArgoNamespace); err != nil {
		return err
	}
	wf, err := c.RunFromTemplate(ctx, ArgoNamespace, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]any{"generateName": probe + "-"},
		"spec":     map[string]any{"workflowTemplateRef": map[string]any{"name": probe}},
	}})
	if err != nil {
		return fmt.Errorf("waiting for Argo's controller: %w", err)
	}
	if phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase"); phase != "Succeeded" {
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		return fmt.Errorf("Argo's probe Workflow %s ended %s: %s", wf.GetName(), phase, msg)
	}
	return c.Dynamic.Resource(WorkflowGVR).Namespace(ArgoNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
}

// RunFromTemplate is RunWorkflow for a Workflow wf (with generateName) that
// refers to a WorkflowTemplate: Argo's controller finds templates in a cache
// of its own, and a Workflow created before that cache holds a template made
// a moment before ends at once in Error, "workflowtemplates.argoproj.io … not
// found"; such a Workflow is submitted again until one runs or ctx ends.
func (c *Cluster) RunFromTemplate(ctx context.Context, ns string, wf *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ended, _, err := c.TimeFromTemplate(ctx, ns, wf)
	return ended, err
}

// TimeFromTemplate is RunFromTemplate, and returns as well how long the
// Workflow that ran took, from its submission to its end as a watch of it
// saw: the submissions made again while the controller's cache did not hold
// the template are not counted.
func (c *Cluster) TimeFromTemplate(ctx context.Context, ns string, wf *unstructured.Unstructured) (*unstructured.Unstructured, time.Duration, error) {
	ref, _, _ := unstructured.NestedString(wf.Object, "spec", "workflowTemplateRef", "name")
	if ref == "" || wf.GetGenerateName() == "" || wf.GetName() != "" {
		return nil, 0, fmt.Errorf("RunFromTemplate: Workflow needs generateName and spec.workflowTemplateRef.name")
	}
	unseen := `workflowtemplates.argoproj.io "` + ref + `" not found`
	for {
		start := time.Now()
		ended, err := c.RunWorkflow(ctx, ns, wf.DeepCopy())
		took := time.Since(start)
		if err != nil {
			return ended, took, err
		}
		phase, _, _ := unstructured.NestedString(ended.Object, "status", "phase")
		msg, _, _ := unstructured.NestedString(ended.Object, "status", "message")
		if phase != "Error" || !strings.Contains(msg, unseen) {
			return ended, took, nil
		}
		select {
		case <-ctx.Done():
			return ended, took, fmt.Errorf("Workflow %s: %s: %w", ended.GetName(), msg, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Resources of the controllers' kinds.
var (
	JobSetGVR   = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	WorkflowGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}
)

// RunWorkflow creates Workflow wf in namespace ns (named, or with
// generateName) and returns it as Argo's controller ended it (phase
// Succeeded, Failed or Error), as a watch of it from its creation sees; or the
// last state seen, with ctx's error.
func (c *Cluster) RunWorkflow(ctx context.Context, ns string, wf *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	workflows := c.Dynamic.Resource(WorkflowGVR).Namespace(ns)
	created, err := workflows.Create(ctx, wf, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("submit Workflow: %w", err)
	}
	// A watch the API server ends early or refuses (its watch cache falling
	// behind under load: "storage is (re)initializing", "Too large resource
	// version") is taken up again from the last version seen, or from the
	// Workflow as it is now, until ctx ends: under the load of thousands of
	// steps the API server may take minutes to catch up.
	last := created
	wait := time.Second
	for {
		w, err := workflows.Watch(ctx, metav1.ListOptions{
			FieldSelector:   "metadata.name=" + created.GetName(),
			ResourceVersion: last.GetResourceVersion(),
		})
		if err == nil {
			events := 0
			for ev := range w.ResultChan() {
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				last, events = u, events+1
				if workflowEnded(u) {
					w.Stop()
					return u, nil
				}
			}
			w.Stop()
			if events > 0 {
				wait = time.Second
			}
		}
		if ctx.Err() != nil {
			phase, _, _ := unstructured.NestedString(last.Object, "status", "phase")
			return last, fmt.Errorf("Workflow %s (phase %q): %w", last.GetName(), phase, ctx.Err())
		}
		if now, err := workflows.Get(ctx, created.GetName(), metav1.GetOptions{}); err == nil {
			last = now
			if workflowEnded(now) {
				return now, nil
			}
		} else if apierrors.IsNotFound(err) {
			return last, fmt.Errorf("Workflow %s was deleted", created.GetName())
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 15*time.Second)
	}
}

// workflowEnded reports whether the Workflow u has ended.
func workflowEnded(u *unstructured.Unstructured) bool {
	switch phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase {
	case "Succeeded", "Failed", "Error":
		return true
	}
	return false
}
