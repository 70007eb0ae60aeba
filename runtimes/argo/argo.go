// Package argo deploys a compiled flow to Argo Workflows and runs it there:
// the flow's WorkflowTemplate is the one the argo target compiles, and every run
// is a Workflow made from it, which Argo's controller runs.
//
// Deploy applies, server-side (field manager "manifold"), everything the argo
// target writes for the flow (package emit/argo): its WorkflowTemplates, the
// CronWorkflow of a scheduled flow, the ConfigMap of its literals and its
// ResourceClaimTemplates. Each object it applies is labelled with the flow
// (manifold.dev/flow) and as deployed (LabelDeploy), so a changed flow is
// updated in place, and what a deploy no longer makes, and Undeploy, delete
// exactly those objects and nothing else. An object of the same name without
// those labels is not Manifold's: Deploy refuses to apply over it, naming its
// field managers, unless told to take it over (Options.TakeOver).
//
// Trigger creates a Workflow from the deployed template with the run's params;
// Follow watches it, and the Workflows its parts create (labelled
// manifold.dev/parent-workflow), with informers (nothing polls) and drives the
// same run state as every runtime (package runtimes/dag): the live display, the
// run's record (.manifold/runs/<workflow>/) and its trace. A step's attempts
// are Argo's retries of its node, a foreach step's items its withItems
// children; its pods' logs are streamed with the same prefixes as a run
// --kube's, and a failed step is named with its pod and the reason.
//
// Stop, Suspend, Resume and Retry act on a Workflow as the argo command does:
// spec.shutdown=Stop, spec.suspend, and Argo's retry of the failed nodes
// (argo retry), which runs again only what failed.
package argo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/emit"
	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// Labels and annotations of what the runtime makes.
const (
	// LabelDeploy marks, with the value "argo", every object Deploy applied:
	// Undeploy deletes the objects of the flow so marked, and only those.
	LabelDeploy = "manifold.dev/deploy"
	// AnnotationFlowHash holds, on a deployed WorkflowTemplate, a digest of the
	// objects the flow compiled to when it was deployed, but for its params'
	// values: Trigger tells when the flow has changed since.
	AnnotationFlowHash = "manifold.dev/flow-hash"
	// LabelParentWorkflow names, on the Workflow of one part of a flow split
	// into parts, the Workflow that created it (emit/argo's).
	LabelParentWorkflow = eargo.LabelParentWorkflow
	// FieldManager is the field manager of Deploy's server-side apply.
	FieldManager = "manifold"
)

// Argo's own labels and annotations.
const (
	labelWorkflow         = "workflows.argoproj.io/workflow"
	labelCompleted        = "workflows.argoproj.io/completed"
	labelPhase            = "workflows.argoproj.io/phase"
	labelWorkflowTemplate = "workflows.argoproj.io/workflow-template"
	labelCronWorkflow     = "workflows.argoproj.io/cron-workflow"
	annotationNodeID      = "workflows.argoproj.io/node-id"
)

// Resources the runtime reads and writes.
var (
	WorkflowGVR         = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflows"}
	WorkflowTemplateGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "workflowtemplates"}
	CronWorkflowGVR     = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "cronworkflows"}
	configMapGVR        = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	claimTemplateGVR    = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}
)

// deployedKinds are the resources of what Deploy may apply, in the order it
// applies them: what a WorkflowTemplate's pods need first.
var deployedKinds = []schema.GroupVersionResource{configMapGVR, claimTemplateGVR, WorkflowTemplateGVR, CronWorkflowGVR}

// Options say which cluster the runtime uses, and how a followed run is shown.
type Options struct {
	// Kubeconfig, Context and Namespace name the cluster and the namespace of
	// a flow whose steps have none, as for run --kube (cluster.Options); QPS and
	// Burst limit the requests made to the API server.
	Kubeconfig, Context, Namespace string
	QPS                            float32
	Burst                          int
	// Program is the flow program's name, used in what a message tells to run
	// ("run `PROGRAM deploy --target argo` first"); "flow" when empty.
	Program string
	// Root holds the run records; record.DefaultRoot when empty.
	Root string
	// Stdout receives progress and the pods' logs; io.Discard when nil.
	Stdout, Stderr io.Writer
	// Live redraws one line per step in place on Stdout, a terminal Width
	// columns wide and Height lines high; otherwise every event is a
	// timestamped line.
	Live          bool
	Width, Height int
	// Tracer traces a followed run (package tracing); nil traces nothing. A run
	// Trigger creates while it is set is traced from its creation, and its
	// steps' pods get the run's trace context as TRACEPARENT.
	Tracer *tracing.Tracer
	// OnInterrupt is asked, when Follow's context ends, whether to stop the
	// Workflow (true) or to leave it running (false, also when nil).
	OnInterrupt func(workflow string) bool
	// Force, when it ends while Follow waits for a stopped Workflow to end,
	// stops the wait.
	Force context.Context
	// TakeOver lets Deploy apply over an object of the name it applies that
	// it did not deploy for the flow (without the flow's deployed labels):
	// it takes the object over, which Undeploy then deletes. Without it such
	// an object is refused (OwnedError).
	TakeOver bool
}

// Client acts on one flow's objects on a cluster that runs Argo Workflows.
type Client struct {
	o    Options
	conn *cluster.Conn
	f    *plan.Flow
	// ns is where the flow's objects and Workflows are.
	ns string
	// traced holds the trace of each run Trigger created traced, by Workflow
	// name, until Follow continues it.
	traced map[string]*tracing.Run
}

// Connect connects to the cluster o names for flow f, and checks that it serves
// Argo's Workflows and WorkflowTemplates.
func Connect(ctx context.Context, f *plan.Flow, o Options) (*Client, error) {
	if o.Program == "" {
		o.Program = "flow"
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Force == nil {
		o.Force = context.Background()
	}
	conn, err := cluster.Connect(ctx, cluster.Options{Kubeconfig: o.Kubeconfig, Context: o.Context, Namespace: o.Namespace, QPS: o.QPS, Burst: o.Burst})
	if err != nil {
		return nil, err
	}
	const install = "install Argo Workflows on it (https://argo-workflows.readthedocs.io/en/latest/installation/), or use another --context"
	for _, gvr := range []schema.GroupVersionResource{WorkflowGVR, WorkflowTemplateGVR} {
		if err := conn.Served(gvr, install); err != nil {
			return nil, err
		}
	}
	c := &Client{o: o, conn: conn, f: f, ns: conn.Namespace}
	if len(f.Steps) > 0 && f.Steps[0].Namespace != "" {
		c.ns = f.Steps[0].Namespace
	}
	return c, nil
}

// SetTracer makes Trigger and Follow trace the runs they create and follow
// with t (nil for none): see Options.Tracer.
func (c *Client) SetTracer(t *tracing.Tracer) { c.o.Tracer = t }

// Namespace is where the flow's objects and Workflows are.
func (c *Client) Namespace() string { return c.ns }

// Where names the cluster: its kubeconfig context and API server.
func (c *Client) Where() string { return c.conn.Host + " (context " + c.conn.Context + ")" }

// Applied is one object Deploy applied, or Undeploy deleted.
type Applied struct {
	Kind, Name string
	// Action says what happened to it: created, updated, unchanged or deleted
	// (with a dry run, what would have).
	Action string
}

func (a Applied) String() string { return strings.ToLower(a.Kind) + "/" + a.Name + " " + a.Action }

// Objects returns what Deploy applies for f in namespace ns, as the argo target
// compiles it, each labelled LabelDeploy, the WorkflowTemplates with
// AnnotationFlowHash.
func Objects(f *plan.Flow, ns string) ([]*unstructured.Unstructured, error) {
	objs, errs := eargo.Objects(f)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if cm := eargo.Literals(f); cm != nil {
		objs = append([]any{cm}, objs...)
	}
	objs = append(emit.ClaimTemplates(f), objs...)
	out := make([]*unstructured.Unstructured, 0, len(objs))
	sum := sha256.New()
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		if u.GetNamespace() == "" {
			u.SetNamespace(ns)
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[plan.LabelFlow], labels[plan.LabelPartOf], labels[LabelDeploy] = f.Name, plan.PartOf, "argo"
		u.SetLabels(labels)
		// The hash leaves out the params' values, which Trigger's run gives
		// anew.
		h := u.DeepCopy()
		if params, ok, _ := unstructured.NestedSlice(h.Object, "spec", "arguments", "parameters"); ok {
			for _, p := range params {
				delete(p.(map[string]any), "value")
			}
			unstructured.SetNestedSlice(h.Object, params, "spec", "arguments", "parameters")
		}
		data, err := json.Marshal(h.Object)
		if err != nil {
			return nil, err
		}
		sum.Write(data)
		out = append(out, u)
	}
	hash := hex.EncodeToString(sum.Sum(nil))[:16]
	for _, u := range out {
		if u.GetKind() == "WorkflowTemplate" {
			a := u.GetAnnotations()
			if a == nil {
				a = map[string]string{}
			}
			a[AnnotationFlowHash] = hash
			u.SetAnnotations(a)
		}
	}
	return out, nil
}

func gvrOf(u *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	for _, gvr := range deployedKinds {
		if gvr.GroupVersion().String() == u.GetAPIVersion() && strings.EqualFold(gvr.Resource, strings.ToLower(u.GetKind())+"s") {
			return gvr, nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("the argo target made a %s %s, which deploy cannot apply", u.GetKind(), u.GetName())
}

// Deploy applies the flow's objects (Objects) server-side, as field manager
// FieldManager, then deletes the objects an earlier deploy of the flow made
// that it no longer makes (a CronWorkflow whose schedule was removed). Every
// object is first applied as a server dry run, so that what RBAC or admission
// refuses is refused before anything changes, and so is an object of a name
// it applies that a deploy of the flow did not make (OwnedError), unless
// Options.TakeOver. With dryRun the API server
// checks and answers for everything, and changes nothing.
func (c *Client) Deploy(ctx context.Context, dryRun bool) ([]Applied, error) {
	objs, err := Objects(c.f, c.ns)
	if err != nil {
		return nil, err
	}
	out, keep, err := c.apply(ctx, objs, true)
	if err != nil || dryRun {
		if err == nil {
			var pruned []Applied
			pruned, err = c.prune(ctx, keep, []string{metav1.DryRunAll})
			out = append(out, pruned...)
		}
		return out, err
	}
	if out, keep, err = c.apply(ctx, objs, false); err != nil {
		return out, err
	}
	pruned, err := c.prune(ctx, keep, nil)
	return append(out, pruned...), err
}

// apply applies objs server-side (as a dry run when dry), and returns what it
// did and the resource/name of each.
func (c *Client) apply(ctx context.Context, objs []*unstructured.Unstructured, dry bool) ([]Applied, map[string]bool, error) {
	var opts metav1.PatchOptions
	opts.FieldManager, opts.Force = FieldManager, new(true)
	if dry {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var out []Applied
	keep := map[string]bool{}
	for _, u := range objs {
		gvr, err := gvrOf(u)
		if err != nil {
			return out, keep, err
		}
		keep[gvr.Resource+"/"+u.GetName()] = true
		res := c.conn.Dynamic.Resource(gvr).Namespace(u.GetNamespace())
		before, err := res.Get(ctx, u.GetName(), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			before = nil
		case err != nil:
			return out, keep, c.refused("read", u, err)
		default:
			if err := c.owned(before); err != nil {
				return out, keep, err
			}
		}
		data, err := json.Marshal(u.Object)
		if err != nil {
			return out, keep, err
		}
		after, err := res.Patch(ctx, u.GetName(), types.ApplyPatchType, data, opts)
		if err != nil {
			return out, keep, c.refused("apply", u, err)
		}
		a := Applied{Kind: u.GetKind(), Name: u.GetName(), Action: "created"}
		switch {
		case before == nil:
		case !dry && before.GetResourceVersion() == after.GetResourceVersion(), dry && sameContent(before, after):
			// A dry run's answer may keep the resource version of an
			// object it would change: its content tells.
			a.Action = "unchanged"
		default:
			a.Action = "updated"
		}
		out = append(out, a)
	}
	return out, keep, nil
}

// sameContent reports whether a and b are the same object but for the
// metadata the API server keeps (versions, managed fields, timestamps).
func sameContent(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		u = u.DeepCopy()
		for _, f := range []string{"resourceVersion", "managedFields", "generation", "creationTimestamp", "uid"} {
			unstructured.RemoveNestedField(u.Object, "metadata", f)
		}
		return u.Object
	}
	return reflect.DeepEqual(strip(a), strip(b))
}

// refused says that the API server refused to do verb with u, and why.
func (c *Client) refused(verb string, u *unstructured.Unstructured, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("RBAC on the cluster at %s does not let this user %s %s %s in namespace %s: %v; ask a cluster admin for it, or use another --namespace or --context", c.Where(), verb, u.GetKind(), u.GetName(), u.GetNamespace(), err)
	}
	return fmt.Errorf("%s %s %s in namespace %s of the cluster at %s: %w", verb, u.GetKind(), u.GetName(), u.GetNamespace(), c.Where(), err)
}

// deployedSelector is the label selector of the objects a deploy of flow
// made: labelled with the flow and LabelDeploy. Deploy applies over no other
// object, and prune and Undeploy delete no other.
func deployedSelector(flow string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{plan.LabelFlow: flow, LabelDeploy: "argo"})
}

// OwnedError is what Deploy returns when an object of a name it applies
// exists and was not deployed by Manifold for the flow: nothing was changed.
type OwnedError struct {
	Kind, Name, Namespace, Flow string
	// Cluster names the cluster (Client.Where).
	Cluster string
	// Managers are the field managers of the object (metadata.managedFields).
	Managers []string
}

// Error names the object, who manages it, and what to do.
func (e *OwnedError) Error() string {
	managed := "no field manager"
	if len(e.Managers) > 0 {
		managed = "field manager " + strings.Join(e.Managers, ", ")
	}
	return fmt.Sprintf("%s %s in namespace %s of the cluster at %s was not deployed by manifold for flow %s (it is managed by %s): deploy leaves it alone; "+
		"delete it or deploy the flow under another name, or deploy with --take-over to take it over (undeploy then deletes it)",
		e.Kind, e.Name, e.Namespace, e.Cluster, e.Flow, managed)
}

// owned refuses to apply over before, the object of u's name on the cluster,
// when a deploy of the flow did not make it, unless Options.TakeOver.
func (c *Client) owned(before *unstructured.Unstructured) error {
	if c.o.TakeOver || deployedSelector(c.f.Name).Matches(labels.Set(before.GetLabels())) {
		return nil
	}
	var managers []string
	for _, m := range before.GetManagedFields() {
		if !slices.Contains(managers, m.Manager) {
			managers = append(managers, m.Manager)
		}
	}
	return &OwnedError{Kind: before.GetKind(), Name: before.GetName(), Namespace: before.GetNamespace(), Flow: c.f.Name, Cluster: c.Where(), Managers: managers}
}

// Undeploy deletes every object a deploy of the flow made (deployedSelector),
// and nothing else; its Workflows stay.
func (c *Client) Undeploy(ctx context.Context, dryRun bool) ([]Applied, error) {
	var dry []string
	if dryRun {
		dry = []string{metav1.DryRunAll}
	}
	return c.prune(ctx, nil, dry)
}

// prune deletes the flow's deployed objects whose resource/name keep lacks.
func (c *Client) prune(ctx context.Context, keep map[string]bool, dry []string) ([]Applied, error) {
	selector := deployedSelector(c.f.Name).String()
	var out []Applied
	for _, gvr := range slices.Backward(deployedKinds) {
		res := c.conn.Dynamic.Resource(gvr).Namespace(c.ns)
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: selector})
		switch {
		case apierrors.IsNotFound(err) && gvr == claimTemplateGVR:
			continue // a cluster without DRA's API has none
		case err != nil:
			return out, fmt.Errorf("list the %s of flow %s in namespace %s of the cluster at %s: %w", gvr.Resource, c.f.Name, c.ns, c.Where(), err)
		}
		for _, u := range list.Items {
			if keep[gvr.Resource+"/"+u.GetName()] {
				continue
			}
			err := res.Delete(ctx, u.GetName(), metav1.DeleteOptions{DryRun: dry})
			if err != nil && !apierrors.IsNotFound(err) {
				return out, c.refused("delete", &u, err)
			}
			out = append(out, Applied{Kind: u.GetKind(), Name: u.GetName(), Action: "deleted"})
		}
	}
	return out, nil
}

// ErrNotDeployed is what Trigger returns, wrapped, when the flow's
// WorkflowTemplate is not on the cluster.
var ErrNotDeployed = errors.New("not deployed")
