package simcluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// The components of the control plane, by the names StopComponent,
// StartComponent and Restart take (and their logs are named after).
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
)

// component returns the cluster's process named name.
func (c *Cluster) component(name string) (int, *process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.procs {
		if p.name == name {
			return i, p, nil
		}
	}
	return 0, nil, fmt.Errorf("the cluster runs no %s", name)
}

// StopComponent stops the component name (SIGTERM, then SIGKILL after 10
// seconds), as a crash or an upgrade of it would, until StartComponent starts it
// again. Stopping one that is stopped does nothing.
func (c *Cluster) StopComponent(name string) error {
	_, p, err := c.component(name)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.held[p] = true
	c.mu.Unlock()
	p.stop(10 * time.Second)
	return nil
}

// StartComponent starts the component name, stopped by StopComponent, again with
// the same arguments: the same ports, and for etcd the same data directory, so
// the cluster keeps its state. It returns once etcd answers its health check, or
// the API server is ready; other components are running when it returns.
// Starting one that runs does nothing.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	i, p, err := c.component(name)
	if err != nil {
		return err
	}
	if p.exited() == nil {
		return nil
	}
	np, err := p.again()
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.procs[i] = np
	delete(c.held, p)
	c.mu.Unlock()
	return c.waitComponent(ctx, name)
}

// Restart stops the component name and starts it again (StopComponent, then
// StartComponent).
func (c *Cluster) Restart(ctx context.Context, name string) error {
	if err := c.StopComponent(name); err != nil {
		return err
	}
	return c.StartComponent(ctx, name)
}

// waitComponent waits until etcd answers its health check, or the API server is
// ready; it returns at once for other components.
func (c *Cluster) waitComponent(ctx context.Context, name string) error {
	switch name {
	case Etcd:
		return c.waitHTTP(ctx, name, c.etcdURL+"/health", nil)
	case APIServer:
		client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		return c.waitHTTP(ctx, name, c.apiURL+"/readyz", client)
	}
	return nil
}

// auditPolicy records, once the API server has answered, each create of the
// kinds a run makes, and of the pods their controllers make with the request's
// body (a pod's name is generated: its labels say whose it is).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods"]
- level: Metadata
  verbs: ["create"]
  resources:
  - group: batch
    resources: ["jobs"]
  - group: jobset.x-k8s.io
    resources: ["jobsets"]
  - group: ""
    resources: ["services"]
- level: None
`

// auditFlags returns the API server's flags for its audit log, if any.
func (c *Cluster) auditFlags() ([]string, error) {
	if c.AuditLog == "" {
		return nil, nil
	}
	policy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + c.AuditLog, "--audit-log-mode=blocking", "--audit-log-format=json"}, nil
}

// Create is one create the API server answered, from its audit log.
type Create struct {
	// Resource is the kind's resource ("jobs", "pods"), Group its API group.
	Resource, Group string
	Namespace, Name string
	// Code is the HTTP status of the answer: 201 when the object was created.
	Code int
	// User is who asked.
	User string
	// Labels are a pod's, from the request (its name is often generated).
	Labels map[string]string
	// DryRun is set for a server-side dry run (dryRun=All), which creates
	// nothing.
	DryRun bool
}

// auditEvent is what Creates reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	URI       string                    `json:"requestURI"`
	User      struct{ Username string } `json:"user"`
	ObjectRef *struct {
		Resource, Namespace, Name, APIGroup string
	} `json:"objectRef"`
	ResponseStatus *struct{ Code int } `json:"responseStatus"`
	RequestObject  *struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	} `json:"requestObject"`
}

// Creates returns every create in namespace ns the API server answered, dry runs
// included, read from its audit log (Options.Audit), oldest first, across its
// restarts.
func (c *Cluster) Creates(ns string) ([]Create, error) {
	if c.AuditLog == "" {
		return nil, fmt.Errorf("the cluster keeps no audit log: start it with Options.Audit")
	}
	f, err := os.Open(c.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Create
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("%s: %w", c.AuditLog, err)
		}
		if ev.Verb != "create" || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || ev.ObjectRef.Namespace != ns {
			continue
		}
		cr := Create{Resource: ev.ObjectRef.Resource, Group: ev.ObjectRef.APIGroup, Namespace: ns, Name: ev.ObjectRef.Name, User: ev.User.Username}
		if u, err := url.Parse(ev.URI); err == nil {
			cr.DryRun = u.Query().Has("dryRun")
		}
		if ev.ResponseStatus != nil {
			cr.Code = ev.ResponseStatus.Code
		}
		if ev.RequestObject != nil {
			cr.Labels = ev.RequestObject.Metadata.Labels
		}
		out = append(out, cr)
	}
	return out, sc.Err()
}
