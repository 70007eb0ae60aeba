package argo

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manifoldflow/manifold/emit"
	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/tracing"
)

// AnnotationParams holds, on a Workflow that Trigger made, the values as given
// (a JSON object, param by name) of the params whose argument Trigger wrote
// otherwise (emit/argo's Carry): Follow records a run's params as given.
const AnnotationParams = "manifold.dev/params"

// TemplateName is the name of the WorkflowTemplate a run of the flow is made
// from.
func (c *Client) TemplateName() string { return emit.Name(emit.MaxNameLength, c.f.Name) }

// Trigger creates a Workflow from the flow's deployed WorkflowTemplate, with
// params (names of the flow's params, checked by the caller) in place of their
// defaults, and returns its name. Each value reaches the steps as given:
// written with emit/argo's Carry, so that Argo's substitution takes nothing
// in it for a template tag; a value holding a character Argo's substitution
// cannot write (emit/argo's Substitutable) is refused. It fails, wrapping
// ErrNotDeployed, when the template is not on the cluster; note, when not empty, says that the deployed
// template is not the flow as it compiles now. With Options.Tracer, the run's
// trace begins here, its steps get its trace context as TRACEPARENT (the
// reserved parameter emit/argo.ParamTraceParent), and Follow of the run
// continues that trace.
func (c *Client) Trigger(ctx context.Context, params map[string]string) (name, note string, err error) {
	wt, err := c.conn.Dynamic.Resource(WorkflowTemplateGVR).Namespace(c.ns).Get(ctx, c.TemplateName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", "", fmt.Errorf("WorkflowTemplate %s of flow %s is not in namespace %s of the cluster at %s: run `%s deploy --target argo` first: %w",
			c.TemplateName(), c.f.Name, c.ns, c.Where(), c.o.Program, ErrNotDeployed)
	case err != nil:
		return "", "", c.refused("read", &unstructured.Unstructured{Object: map[string]any{"kind": "WorkflowTemplate", "metadata": map[string]any{"name": c.TemplateName(), "namespace": c.ns}}}, err)
	}
	if objs, err := Objects(c.f, c.ns); err == nil {
		for _, o := range objs {
			if o.GetKind() == "WorkflowTemplate" && o.GetName() == wt.GetName() && o.GetAnnotations()[AnnotationFlowHash] != wt.GetAnnotations()[AnnotationFlowHash] {
				note = fmt.Sprintf("the deployed WorkflowTemplate %s is not flow %s as it compiles now: `%s deploy --target argo` updates it", wt.GetName(), c.f.Name, c.o.Program)
			}
		}
	}
	var args []any
	given := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		if err := eargo.Substitutable(v); err != nil {
			return "", note, fmt.Errorf("--param %s: %w", k, err)
		}
		// Argo substitutes a Workflow's arguments into its templates, and
		// reads a "{{" there as a tag: the value is carried as the argo
		// target carries a param's default, through the kubelet's
		// expansion, which the steps' MANIFOLD_BRACES makes "{{" again.
		carried := eargo.Carry(v)
		if carried != v && note != "" {
			return "", note, fmt.Errorf("--param %s: the value holds \"{{\" or $(%s), which the deployed WorkflowTemplate %s, not flow %s as it compiles now, may not carry; run `%s deploy --target argo` first",
				k, eargo.BracesEnv, wt.GetName(), c.f.Name, c.o.Program)
		}
		args = append(args, map[string]any{"name": k, "value": carried})
		if carried != v {
			given[k] = v
		}
	}
	wf := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Workflow",
		"metadata": map[string]any{
			"generateName": c.TemplateName() + "-",
			"namespace":    c.ns,
			"labels":       map[string]any{plan.LabelFlow: c.f.Name, plan.LabelPartOf: plan.PartOf},
		},
		"spec": map[string]any{"workflowTemplateRef": map[string]any{"name": c.TemplateName()}},
	}}
	if len(given) > 0 {
		data, err := json.Marshal(given)
		if err != nil {
			return "", note, err
		}
		wf.SetAnnotations(map[string]string{AnnotationParams: string(data)})
	}
	// A traced run's span begins now, so that its steps continue it: its
	// trace context is the reserved parameter that becomes their TRACEPARENT.
	trace := c.o.Tracer.Begin(c.f, "", "argo")
	if tp := trace.TraceParent(); tp != "" {
		args = append(args, map[string]any{"name": eargo.ParamTraceParent, "value": tp})
	}
	if len(args) > 0 {
		unstructured.SetNestedSlice(wf.Object, args, "spec", "arguments", "parameters")
	}
	got, err := c.conn.Dynamic.Resource(WorkflowGVR).Namespace(c.ns).Create(ctx, wf, metav1.CreateOptions{})
	if err != nil {
		// The span is never ended, so never exported: there was no run.
		return "", note, c.refused("create", wf, err)
	}
	if trace != nil {
		if c.traced == nil {
			c.traced = map[string]*tracing.Run{}
		}
		c.traced[got.GetName()] = trace
	}
	return got.GetName(), note, nil
}

// cronName is the name of the flow's CronWorkflow, "" for a flow without a
// schedule.
func (c *Client) cronName() string {
	objs, errs := eargo.Objects(c.f)
	if len(errs) > 0 {
		return ""
	}
	for _, o := range objs {
		if cw, ok := o.(*wfv1.CronWorkflow); ok {
			return cw.Name
		}
	}
	return ""
}

func toWorkflow(u *unstructured.Unstructured) (*wfv1.Workflow, error) {
	var wf wfv1.Workflow
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &wf); err != nil {
		return nil, fmt.Errorf("Workflow %s: %w", u.GetName(), err)
	}
	if wf.Status.IsOffloadNodeStatus() {
		return nil, fmt.Errorf("Workflow %s keeps its nodes offloaded to a database, which this command does not read; use the argo command", u.GetName())
	}
	if wf.Status.CompressedNodes != "" {
		nodes, err := decompressNodes(wf.Status.CompressedNodes)
		if err != nil {
			return nil, fmt.Errorf("Workflow %s: its compressed nodes: %w", u.GetName(), err)
		}
		wf.Status.Nodes, wf.Status.CompressedNodes = nodes, ""
	}
	return &wf, nil
}

// decompressNodes reads the nodes Argo's controller keeps compressed in a
// Workflow grown large (a fan-out of many items): the JSON of the nodes,
// gzipped, in base64 (util/file's CompressEncodeString).
func decompressNodes(s string) (wfv1.Nodes, error) {
	data, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var nodes wfv1.Nodes
	if err := json.NewDecoder(zr).Decode(&nodes); err != nil {
		return nil, err
	}
	return nodes, nil
}

// Summary is one run of the flow as List shows it.
type Summary struct {
	Name     string
	Phase    string
	Started  time.Time
	Finished time.Time
	Message  string
	// Progress is Argo's count of pods done out of all, "3/5".
	Progress string
}

// List returns the flow's runs on the cluster, oldest first: the Workflows
// labelled with the flow (Trigger's) or made from its WorkflowTemplate (its
// CronWorkflow's), but not those of a split flow's parts.
func (c *Client) List(ctx context.Context) ([]Summary, error) {
	res := c.conn.Dynamic.Resource(WorkflowGVR).Namespace(c.ns)
	seen := map[string]Summary{}
	selectors := []string{
		plan.LabelFlow + "=" + c.f.Name + ",!" + LabelParentWorkflow,
		labelWorkflowTemplate + "=" + c.TemplateName() + ",!" + LabelParentWorkflow,
	}
	if cron := c.cronName(); cron != "" {
		selectors = append(selectors, labelCronWorkflow+"="+cron+",!"+LabelParentWorkflow)
	}
	for _, sel := range selectors {
		list, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("list the Workflows of flow %s in namespace %s of the cluster at %s: %w", c.f.Name, c.ns, c.Where(), err)
		}
		for _, u := range list.Items {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
			progress, _, _ := unstructured.NestedString(u.Object, "status", "progress")
			s := Summary{Name: u.GetName(), Phase: phase, Started: u.GetCreationTimestamp().Time, Message: msg, Progress: progress}
			if at, _, _ := unstructured.NestedString(u.Object, "status", "finishedAt"); at != "" {
				s.Finished, _ = time.Parse(time.RFC3339, at)
			}
			if s.Phase == "" {
				s.Phase = "Pending"
			}
			if susp, _, _ := unstructured.NestedBool(u.Object, "spec", "suspend"); susp && s.Phase == "Running" {
				s.Phase = "Suspended"
			}
			seen[s.Name] = s
		}
	}
	out := slices.Collect(maps.Values(seen))
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Started.Equal(out[j].Started) {
			return out[i].Started.Before(out[j].Started)
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// run returns the Workflow called name, refusing one that is not the flow's.
func (c *Client) run(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	u, err := c.conn.Dynamic.Resource(WorkflowGVR).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("no Workflow %s in namespace %s of the cluster at %s (`runs list --target argo` lists the flow's)", name, c.ns, c.Where())
	}
	if err != nil {
		return nil, err
	}
	if l := u.GetLabels(); l[plan.LabelFlow] != c.f.Name && l[labelWorkflowTemplate] != c.TemplateName() && (l[labelCronWorkflow] == "" || l[labelCronWorkflow] != c.cronName()) {
		return nil, fmt.Errorf("Workflow %s in namespace %s is not a run of flow %s", name, c.ns, c.f.Name)
	}
	return u, nil
}

// workflow returns Workflow name, a run of the flow (run), decoded.
func (c *Client) workflow(ctx context.Context, name string) (*wfv1.Workflow, error) {
	u, err := c.run(ctx, name)
	if err != nil {
		return nil, err
	}
	return toWorkflow(u)
}

// mergePatch patches Workflow name (a run of the flow) with patch.
func (c *Client) mergePatch(ctx context.Context, name string, patch map[string]any) error {
	if _, err := c.run(ctx, name); err != nil {
		return err
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.conn.Dynamic.Resource(WorkflowGVR).Namespace(c.ns).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// ended reports whether a Workflow in phase has ended.
func ended(phase string) bool {
	switch wfv1.WorkflowPhase(phase) {
	case wfv1.WorkflowSucceeded, wfv1.WorkflowFailed, wfv1.WorkflowError:
		return true
	}
	return false
}

// Stop stops Workflow name as `argo stop` does (spec.shutdown=Stop): its running
// pods are stopped, no step starts, and it ends Failed.
func (c *Client) Stop(ctx context.Context, name string) error {
	u, err := c.run(ctx, name)
	if err != nil {
		return err
	}
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); ended(phase) {
		return fmt.Errorf("Workflow %s has ended (%s): there is nothing to stop", name, phase)
	}
	return c.mergePatch(ctx, name, map[string]any{"spec": map[string]any{"shutdown": string(wfv1.ShutdownStrategyStop)}})
}

// Suspend suspends Workflow name (spec.suspend): running steps finish, and no
// step starts until Resume.
func (c *Client) Suspend(ctx context.Context, name string) error {
	return c.suspend(ctx, name, true)
}

// Resume resumes Workflow name, suspended by Suspend.
func (c *Client) Resume(ctx context.Context, name string) error {
	return c.suspend(ctx, name, false)
}

func (c *Client) suspend(ctx context.Context, name string, on bool) error {
	u, err := c.run(ctx, name)
	if err != nil {
		return err
	}
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); ended(phase) {
		return fmt.Errorf("Workflow %s has ended (%s): only a running Workflow can be suspended or resumed", name, phase)
	}
	var v any = true
	if !on {
		v = nil
	}
	return c.mergePatch(ctx, name, map[string]any{"spec": map[string]any{"suspend": v}})
}

// Retry runs again the failed steps of Workflow name, in place, as `argo retry`
// does (FormulateRetryWorkflow in Argo's workflow/util): each failed pod node
// is deleted with its pod, the nodes above it (its retry node, the task group
// of its foreach item, the DAG) are reset to running, the Workflow's phase,
// message, finish time, completed label and shutdown are cleared, and Argo's
// controller carries on from there; what succeeded is not run again. It
// returns the steps it runs again.
//
// Retrying a split flow's parent (emit/argo's IsParent) retries its failed
// part tasks: each creates its part's Workflow anew, from the part's
// WorkflowTemplate as deployed now, which runs every step of the part from
// the start (the steps of the part that succeeded too); parts that succeeded
// are not run again, and the part's failed Workflow stays as it ended.
// Follow, Show and Logs then read the newest Workflow of each part.
func (c *Client) Retry(ctx context.Context, name string) ([]string, error) {
	wf, err := c.workflow(ctx, name)
	if err != nil {
		return nil, err
	}
	switch wf.Status.Phase {
	case wfv1.WorkflowFailed, wfv1.WorkflowError:
	default:
		return nil, fmt.Errorf("Workflow %s is %s: only a run that failed can be retried", name, cmpPhase(wf.Status.Phase))
	}
	newWf, pods, steps := retried(wf, time.Now())
	if eargo.IsParent(wf) {
		if steps, err = c.partSteps(ctx, wf, pods); err != nil {
			return nil, err
		}
	}
	list, err := c.conn.Client.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: labelWorkflow + "=" + name})
	if err != nil {
		return nil, err
	}
	for _, p := range list.Items {
		if !pods[p.Annotations[annotationNodeID]] {
			continue
		}
		if err := c.conn.Client.CoreV1().Pods(c.ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete pod %s of the failed step: %w", p.Name, err)
		}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(newWf)
	if err != nil {
		return nil, err
	}
	if _, err := c.conn.Dynamic.Resource(WorkflowGVR).Namespace(c.ns).Update(ctx, &unstructured.Unstructured{Object: m}, metav1.UpdateOptions{}); err != nil {
		return nil, fmt.Errorf("update Workflow %s: %w", name, err)
	}
	return steps, nil
}

// partSteps returns the steps that parent's part tasks among nodes run (the
// failed ones, and those after them, which did not run): the steps of those
// parts' WorkflowTemplates, in flow order.
func (c *Client) partSteps(ctx context.Context, parent *wfv1.Workflow, nodes map[string]bool) ([]string, error) {
	set := map[string]bool{}
	for id := range nodes {
		n := parent.Status.Nodes[id]
		part, err := strconv.Atoi(strings.TrimPrefix(n.TemplateName, "p"))
		if !strings.HasPrefix(n.TemplateName, "p") || err != nil || eargo.PartTask(part) != n.TemplateName {
			continue
		}
		name := eargo.PartName(c.f.Name, part)
		u, err := c.conn.Dynamic.Resource(WorkflowTemplateGVR).Namespace(c.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("part %d of run %s: WorkflowTemplate %s: %w", part, parent.Name, name, err)
		}
		var tpl wfv1.WorkflowTemplate
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &tpl); err != nil {
			return nil, fmt.Errorf("WorkflowTemplate %s: %w", name, err)
		}
		for _, t := range tpl.Spec.Templates {
			if t.DAG == nil {
				continue
			}
			for _, task := range t.DAG.Tasks {
				if s := eargo.StepOfTask(task.Name); c.f.Step(s) != nil {
					set[s] = true
				}
			}
		}
	}
	var steps []string
	for i := range c.f.Steps {
		if set[c.f.Steps[i].Name] {
			steps = append(steps, c.f.Steps[i].Name)
		}
	}
	return steps, nil
}

func cmpPhase(p wfv1.WorkflowPhase) string {
	if p == "" {
		return "pending"
	}
	return strings.ToLower(string(p))
}

// retried returns Workflow wf made ready to run its failed nodes again (see
// Retry), the IDs of the pod nodes whose pods to delete, and the steps run
// again.
func retried(wf *wfv1.Workflow, now time.Time) (*wfv1.Workflow, map[string]bool, []string) {
	out := wf.DeepCopy()
	restart(out, now)
	parent := nodeParents(wf)
	del := failedNodes(wf, parent)
	reset, stepSet := resetNodes(wf, parent, del)
	out.Status.Nodes = keptNodes(wf, del, reset, now)
	delete(stepSet, "")
	return out, del, slices.Sorted(maps.Keys(stepSet))
}

// restart makes Workflow out running again from now: its completed label,
// phase, message, finish time and shutdown are cleared, and so is an active
// deadline of 0 (which stopped it).
func restart(out *wfv1.Workflow, now time.Time) {
	delete(out.Labels, labelCompleted)
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[labelPhase] = string(wfv1.NodeRunning)
	out.Status.Conditions.UpsertCondition(wfv1.Condition{Status: metav1.ConditionFalse, Type: wfv1.ConditionTypeCompleted})
	out.Status.Phase = wfv1.WorkflowRunning
	out.Status.Message = ""
	out.Status.StartedAt = metav1.Time{Time: now.UTC()}
	out.Status.FinishedAt = metav1.Time{}
	out.Spec.Shutdown = ""
	if out.Status.StoredWorkflowSpec != nil {
		out.Status.StoredWorkflowSpec.Shutdown = ""
	}
	if d := out.Spec.ActiveDeadlineSeconds; d != nil && *d == 0 {
		out.Spec.ActiveDeadlineSeconds = nil
	}
}

// nodeParents returns the parent of each node of Workflow wf that has one, by
// ID.
func nodeParents(wf *wfv1.Workflow) map[string]string {
	parent := map[string]string{}
	for id, n := range wf.Status.Nodes {
		for _, ch := range n.Children {
			parent[ch] = id
		}
	}
	return parent
}

// failedNodes returns the IDs of the nodes of Workflow wf to run again: the
// failed pod nodes with no succeeded node below what they retry, and what
// follows them in the DAG. parent is nodeParents(wf).
func failedNodes(wf *wfv1.Workflow, parent map[string]string) map[string]bool {
	// The failed pod nodes with no succeeded node below what they retry.
	del := map[string]bool{}
	for id, n := range wf.Status.Nodes {
		if n.Type != wfv1.NodeTypePod || !n.FailedOrError() {
			continue
		}
		del[id] = true
	}
	// A retry node one of whose attempts succeeded is not run again.
	for id := range del {
		if p, ok := wf.Status.Nodes[parent[id]]; ok && p.Type == wfv1.NodeTypeRetry && p.Phase == wfv1.NodeSucceeded {
			delete(del, id)
		}
	}
	// What follows a failed node in the DAG (its children: the tasks that
	// depend on it, omitted) goes too, or Argo would take it as done.
	var below func(id string)
	below = func(id string) {
		for _, ch := range wf.Status.Nodes[id].Children {
			if !del[ch] {
				del[ch] = true
				below(ch)
			}
		}
	}
	for _, id := range slices.Collect(maps.Keys(del)) {
		below(id)
	}
	return del
}

// resetNodes returns the nodes of Workflow wf above those of del that are
// reset to running (the DAGs and steps that hold them, and the failed retry
// nodes), and the steps of del's failed pod nodes ("" for a node of no step).
func resetNodes(wf *wfv1.Workflow, parent map[string]string, del map[string]bool) (map[string]bool, map[string]bool) {
	reset := map[string]bool{}
	stepSet := map[string]bool{}
	for id := range del {
		n := wf.Status.Nodes[id]
		if n.Type == wfv1.NodeTypePod && n.FailedOrError() {
			stepSet[eargo.StepOfNode(&n)] = true
		}
		for p := parent[id]; p != "" && !del[p]; p = parent[p] {
			n := wf.Status.Nodes[p]
			switch {
			case n.Type == wfv1.NodeTypeDAG || n.Type == wfv1.NodeTypeTaskGroup || n.Type == wfv1.NodeTypeSteps || n.Type == wfv1.NodeTypeStepGroup:
				reset[p] = true
			case n.Type == wfv1.NodeTypeRetry && n.FailedOrError():
				reset[p] = true
			}
		}
	}
	return reset, stepSet
}

// keptNodes returns the nodes of Workflow wf but those of del, the nodes of
// reset running again from now, and no node naming one of del as its child or
// outbound node.
func keptNodes(wf *wfv1.Workflow, del, reset map[string]bool, now time.Time) wfv1.Nodes {
	nodes := wfv1.Nodes{}
	for id, n := range wf.Status.Nodes {
		if del[id] {
			continue
		}
		n = *n.DeepCopy()
		if reset[id] {
			if n.Phase != wfv1.NodeSkipped {
				n.Phase = wfv1.NodeRunning
			}
			n.Message = ""
			n.StartedAt = metav1.Time{Time: now.UTC()}
			n.FinishedAt = metav1.Time{}
		}
		n.Children = slices.DeleteFunc(slices.Clone(n.Children), func(ch string) bool { return del[ch] })
		n.OutboundNodes = slices.DeleteFunc(slices.Clone(n.OutboundNodes), func(ch string) bool { return del[ch] })
		nodes[id] = n
	}
	return nodes
}

// podName is the name of the pod of Argo's node n of Workflow wf: the
// workflow's name and the node's template, then a hash of the node's name (the
// pod names of Argo's v2, its default; GeneratePodName in its workflow/util).
func podName(wf *wfv1.Workflow, n wfv1.NodeStatus) string {
	prefix := wf.Name
	tmpl := n.TemplateName
	if n.TemplateRef != nil {
		tmpl = n.TemplateRef.Template
	}
	if tmpl != "" {
		prefix += "-" + tmpl
	}
	// A name is at most 253 characters, and the hash takes up to 10.
	if len(prefix) > 253-10-1 {
		prefix = prefix[:253-10-1]
	}
	h := fnv.New32a()
	h.Write([]byte(n.Name))
	return prefix + "-" + strconv.FormatUint(uint64(h.Sum32()), 10)
}
