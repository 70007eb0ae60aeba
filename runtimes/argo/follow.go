package argo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	eargo "github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/cluster"
	"github.com/manifoldflow/manifold/runtimes/dag"
	"github.com/manifoldflow/manifold/runtimes/display"
	"github.com/manifoldflow/manifold/runtimes/record"
)

// unit is a step, or one item of a foreach step, as Follow sees it in the
// Workflow's nodes.
type unit struct {
	*dag.Unit
	// attempts is how many attempts were started (dag.Run.Start), running the
	// attempt whose running was told (dag.Run.Running).
	attempts, running int
	// Guarded by the run's lock (dag.Run.Locked): what the view shows.
	pod, node string
}

// follower follows one Workflow of the flow.
type follower struct {
	*dag.Run
	c     *Client
	name  string
	units []*unit
	byKey map[string]*unit
	// unitsMu guards units against the view, which reads them as made adds
	// a fan-out's.
	unitsMu sync.Mutex
	kick    chan struct{}

	wf, parts, pods cache.SharedIndexInformer
	// latest is the Workflow as last seen, whose nodes' outputs hold the
	// values its steps published (valueStore).
	latest *wfv1.Workflow
	// lastPod keeps each node's pod as last seen, for a failure named after a
	// pod that is gone.
	lastPod map[string]*corev1.Pod
	// suspended is whether the Workflow was last seen suspended; stopping
	// that Follow stopped it, so what fails from now on was interrupted.
	suspended, stopping bool

	// logs follows the pods' logs; logCtx ends the informers.
	logs    *cluster.LogFollower
	logCtx  context.Context
	logStop context.CancelFunc
}

func unitKey(step string, index int) string { return step + "/" + strconv.Itoa(index) }

// recordRoot is the directory the runs are recorded under: Options.Root, else
// record.DefaultRoot, made absolute.
func (c *Client) recordRoot() (string, error) {
	root := c.o.Root
	if root == "" {
		root = record.DefaultRoot
	}
	return filepath.Abs(root)
}

// runParams returns the params of Workflow wf, a run of flow rp: the flow's,
// then the Workflow's arguments, then the values Trigger carried, as given.
func runParams(rp *plan.Flow, wf *wfv1.Workflow) map[string]string {
	params := map[string]string{}
	for _, p := range rp.Params {
		params[p.Name] = p.Value
	}
	for _, p := range wf.Spec.Arguments.Parameters {
		// Reserved parameters (the trace context, a part's run ID) begin with
		// "_", which a flow's param cannot: they are not the run's params.
		if p.Value != nil && !strings.HasPrefix(p.Name, "_") {
			params[p.Name] = p.Value.String()
		}
	}
	// The values Trigger carried, as given.
	var given map[string]string
	if a := wf.Annotations[AnnotationParams]; a != "" && json.Unmarshal([]byte(a), &given) == nil {
		for k, v := range given {
			if _, ok := params[k]; ok {
				params[k] = v
			}
		}
	}
	return params
}

// newFollower returns the follower of Workflow wf, named name, a run of flow
// rp recorded in dir: its record as it starts, and a unit per step, or per
// item of a foreach step.
func (c *Client) newFollower(rp *plan.Flow, wf *wfv1.Workflow, name, dir string) *follower {
	f := &follower{Run: dag.New(rp, name, dir), c: c, name: name, byKey: map[string]*unit{}, kick: make(chan struct{}, 1),
		lastPod: map[string]*corev1.Pod{}}
	f.logCtx, f.logStop = context.WithCancel(context.Background())
	f.Rec = record.Record{
		Flow: rp.Name, ID: name, State: record.Running, Start: wf.CreationTimestamp.UTC(), PID: os.Getpid(), Params: runParams(rp, wf),
		Runtime: record.Argo, Cluster: c.conn.Host, Context: c.conn.Context, Namespace: c.ns,
	}
	if a := rp.Artifacts; a != nil {
		f.Rec.Artifacts = &record.Artifacts{URL: a.URL, Endpoint: a.Endpoint, Claim: a.Claim}
	}
	f.Dynamic = dag.Dynamic{Store: &valueStore{f: f}, Made: f.made}
	for i := range rp.Steps {
		s := &rp.Steps[i]
		items := 0
		if s.Nodes <= 1 {
			items = len(s.Foreach)
		}
		f.Rec.Steps = append(f.Rec.Steps, record.StepInfo{Name: s.Name, After: s.After, Items: items})
		if s.ForeachOf != nil {
			continue // its units are made once its list is known (made)
		}
		if items == 0 {
			f.units = append(f.units, &unit{Unit: dag.NewUnit(s, -1)})
		}
		for j := range items {
			f.units = append(f.units, &unit{Unit: dag.NewUnit(s, j)})
		}
	}
	return f
}

// addUnits adds the units to the run and writes their tasks and the run's
// record, and returns the units' labels, in flow order.
func (f *follower) addUnits() ([]string, error) {
	labels := make([]string, 0, len(f.units))
	for _, u := range f.units {
		f.Add(u.Unit)
		f.byKey[unitKey(u.Step.Name, u.Index)] = u
		labels = append(labels, u.Label)
		if err := record.WriteTask(f.Dir, f.Task(u.Unit)); err != nil {
			return nil, err
		}
	}
	return labels, record.WriteRecord(f.Dir, f.Rec)
}

// traceRun continues the trace Trigger began of the run, or begins one.
func (f *follower) traceRun() {
	c := f.c
	if tr := c.traced[f.name]; tr != nil {
		// Trigger began the run's trace, which its steps continue.
		delete(c.traced, f.name)
		tr.Identify(f.name)
		f.Trace = tr
	} else {
		f.Trace = c.o.Tracer.Begin(f.Flow, f.name, "argo")
	}
}

// Follow follows Workflow name, a run of the flow, until it ends, showing it
// and recording it (under Options.Root, in a directory named after it) as every
// runtime does, and returns how it ended: the error says which steps failed and
// why, with the pod and its reason. When ctx ends first, Options.OnInterrupt
// decides whether the Workflow is stopped (and followed until it ends, or until
// Options.Force ends) or left running; the run is recorded interrupted.
func (c *Client) Follow(ctx context.Context, name string) (*dag.Result, error) {
	wf, err := c.workflow(ctx, name)
	if err != nil {
		return nil, err
	}
	root, err := c.recordRoot()
	if err != nil {
		return nil, err
	}
	dir, lk, err := record.Open(root, name)
	if err != nil {
		return nil, err
	}
	defer lk.Close()

	rp := *c.f
	rp.Run, rp.Schedule = name, ""
	f := c.newFollower(&rp, wf, name, dir)
	labels, err := f.addUnits()
	if err != nil {
		return nil, err
	}
	f.traceRun()
	o := c.o
	f.Disp = display.New(display.Options{
		Stdout: o.Stdout, Stderr: o.Stderr, Live: o.Live, Width: o.Width, Height: o.Height,
		Labels: labels, View: f.view, StateColumn: 1,
	})
	f.logs = cluster.NewLogFollower(f.Disp, dir, func(ns string) cluster.PodLogs { return c.conn.Client.CoreV1().Pods(ns) })
	if err := f.watch(); err != nil {
		return nil, err
	}
	f.Disp.Note("following Workflow %s of flow %s: %s in namespace %s of %s (context %s); record in %s",
		name, rp.Name, display.Count(len(rp.Steps), "step"), c.ns, c.conn.Host, c.conn.Context, display.Rel(dir))
	f.Disp.Start()
	return f.end(f.loop(ctx))
}

// end records how the run ended once the loop is over, interrupted saying
// whether ctx interrupted the following: the units that had not ended then are
// interrupted, and the error says whether the Workflow was stopped or runs on.
func (f *follower) end(interrupted bool) (*dag.Result, error) {
	if interrupted {
		for _, u := range f.units {
			if !f.Final(u.Unit) {
				f.Interrupt(u.Unit, "")
			}
		}
	}
	f.stopLogs()
	res, err := f.Finish(interrupted, nil)
	if res.State == record.Interrupted && interrupted {
		// A Workflow is not resumed by run ID: it was stopped, or runs on.
		what := fmt.Sprintf("Workflow %s goes on running on the cluster (`%s runs show --target argo %s` shows it)", f.name, f.c.o.Program, f.name)
		if f.stopping {
			what = "Workflow " + f.name + " was stopped"
		}
		err = fmt.Errorf("following run %s %w: %s", f.name, dag.ErrInterrupted, what)
		f.Rec.Error = err.Error()
		if werr := record.WriteRecord(f.Dir, f.Rec); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	f.Disp.Stop()
	f.Ended(res.State)
	return res, err
}

// watch starts informers on the Workflow, the Workflows of its parts and the
// pods of Argo's Workflows in the namespace, each change waking the loop.
func (f *follower) watch() error {
	c := f.c
	kick := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { f.wake() },
		UpdateFunc: func(any, any) { f.wake() },
		DeleteFunc: func(any) { f.wake() },
	}
	f.wf = kubeclient.DynamicInformer(c.conn.Dynamic, WorkflowGVR, c.ns, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + f.name
	})
	f.parts = kubeclient.DynamicInformer(c.conn.Dynamic, WorkflowGVR, c.ns, func(o *metav1.ListOptions) {
		o.LabelSelector = LabelParentWorkflow + "=" + f.name
	})
	f.pods = kubeclient.Informer(c.conn.Client.CoreV1().Pods(c.ns), &corev1.Pod{}, func(o *metav1.ListOptions) { o.LabelSelector = labelWorkflow })
	infs := []cache.SharedIndexInformer{f.wf, f.parts, f.pods}
	for _, inf := range infs {
		if _, err := inf.AddEventHandler(kick); err != nil {
			return err
		}
	}
	for _, inf := range infs {
		go inf.RunWithContext(f.logCtx)
	}
	return nil
}

func (f *follower) wake() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// loop follows the Workflow until it ends, and reports whether ctx interrupted
// the following.
func (f *follower) loop(ctx context.Context) bool {
	interrupted := false
	done := ctx.Done()
	var force <-chan struct{}
	for {
		select {
		case <-f.kick:
		case <-done:
			done, interrupted = nil, true
			if !f.interrupted() {
				return true
			}
			force = f.c.o.Force.Done()
		case <-force:
			f.Disp.Note("not waiting any longer for Workflow %s to stop", f.name)
			return true
		}
		if !f.wf.HasSynced() || !f.parts.HasSynced() || !f.pods.HasSynced() {
			continue
		}
		if f.reconcile() {
			return interrupted
		}
	}
}

// interrupted asks whether to stop the Workflow, stops it when so, and
// reports whether the loop is to follow it until it ends.
func (f *follower) interrupted() bool {
	stop := false
	if ask := f.c.o.OnInterrupt; ask != nil {
		f.Disp.Stop()
		stop = ask(f.name)
		f.Disp.Start()
	}
	if !stop {
		f.Disp.Note("left Workflow %s running on the cluster: `%s runs show --target argo %s` shows it, `%s stop --target argo %s` stops it",
			f.name, f.c.o.Program, f.name, f.c.o.Program, f.name)
		return false
	}
	ctx, cancel := context.WithTimeout(f.c.o.Force, time.Minute)
	defer cancel()
	if err := f.c.Stop(ctx, f.name); err != nil {
		f.Disp.Note("stopping Workflow %s: %v", f.name, err)
		return false
	}
	f.stopping = true
	f.Disp.Note("stopping Workflow %s (spec.shutdown=Stop); waiting for it to end (Ctrl-C again to stop waiting)", f.name)
	return true
}

// reconcile brings the run's units up to what the informers show, and reports
// whether the Workflow has ended.
func (f *follower) reconcile() bool {
	obj, ok, _ := f.wf.GetStore().GetByKey(f.c.ns + "/" + f.name)
	if !ok {
		for _, u := range f.units {
			if !f.Final(u.Unit) {
				f.Interrupt(u.Unit, "Workflow "+f.name+" was deleted")
			}
		}
		return true
	}
	root, err := toWorkflow(obj.(*unstructured.Unstructured))
	if err != nil {
		f.Disp.Note("%v", err)
		return true
	}
	f.latest = root
	wfs := append([]*wfv1.Workflow{root}, latestParts(root, f.partWorkflows())...)
	pods := f.nodePods(wfs)
	f.noteSuspended(root)
	for _, w := range wfs {
		f.nodes(w, pods)
	}
	f.Release()
	if !ended(string(root.Status.Phase)) {
		return false
	}
	f.endUnits(root, wfs[1:])
	return true
}

// partWorkflows returns the Workflows of the run's parts that the informer
// holds, every one of each part's.
func (f *follower) partWorkflows() []*wfv1.Workflow {
	var parts []*wfv1.Workflow
	for _, o := range f.parts.GetStore().List() {
		if w, err := toWorkflow(o.(*unstructured.Unstructured)); err == nil {
			parts = append(parts, w)
		}
	}
	return parts
}

// nodePods returns the pods of Workflows wfs by the ID of the node that runs
// each, keeping each node's pod as last seen (lastPod) once it is gone.
func (f *follower) nodePods(wfs []*wfv1.Workflow) map[string]*corev1.Pod {
	names := map[string]bool{}
	for _, w := range wfs {
		names[w.Name] = true
	}
	pods := map[string]*corev1.Pod{}
	for _, o := range f.pods.GetStore().List() {
		p := o.(*corev1.Pod)
		if id := p.Annotations[annotationNodeID]; id != "" && names[p.Labels[labelWorkflow]] {
			pods[id], f.lastPod[id] = p, p
		}
	}
	for id, p := range f.lastPod {
		if _, ok := pods[id]; !ok {
			pods[id] = p
		}
	}
	return pods
}

// noteSuspended tells when Workflow root is suspended, or resumed, since it
// was last seen.
func (f *follower) noteSuspended(root *wfv1.Workflow) {
	if susp := root.Spec.Suspend != nil && *root.Spec.Suspend; susp != f.suspended {
		f.suspended = susp
		if susp {
			f.Disp.Note("Workflow %s is suspended: no step starts until `%s unsuspend --target argo %s`", f.name, f.c.o.Program, f.name)
		} else {
			f.Disp.Note("Workflow %s resumed", f.name)
		}
	}
}

// endUnits ends the units that have not ended once Workflow root has, parts
// being the latest Workflows of its parts.
func (f *follower) endUnits(root *wfv1.Workflow, parts []*wfv1.Workflow) {
	why := endedWhy(f.name, root, parts)
	// With no step failed, a Workflow that ended otherwise than Succeeded (a
	// part's Workflow not created, a template not found) fails the steps it
	// did not run, so that the run fails, saying why; else they are only not
	// run.
	accounted := root.Status.Phase == wfv1.WorkflowSucceeded || f.stopping
	for _, u := range f.units {
		accounted = accounted || f.Task(u.Unit).State == record.Failed
	}
	for _, u := range f.units {
		if f.Final(u.Unit) {
			continue
		}
		if !accounted {
			f.Fail(u.Unit, why, string(root.Status.Phase), nil)
		} else {
			f.Interrupt(u.Unit, why)
		}
	}
}

// endedWhy says why a unit of Workflow name did not run, once the Workflow
// (root, with its parts' latest Workflows parts) has ended: its phase and
// message, and each part's task that failed with no step failed.
func endedWhy(name string, root *wfv1.Workflow, parts []*wfv1.Workflow) string {
	why := "not run: Workflow " + name + " ended " + string(root.Status.Phase)
	if root.Status.Message != "" {
		why += " (" + root.Status.Message + ")"
	}
	// A part's task that failed with no step failed, as when the part's
	// Workflow could not be created, says why.
	var ps []wfv1.Workflow
	for _, w := range parts {
		ps = append(ps, *w)
	}
	for _, fl := range eargo.Failures(root, ps) {
		if fl.Step == "" {
			why += fmt.Sprintf("; its task %s of part %d %s: %s", eargo.PartTask(fl.Part), fl.Part, strings.ToLower(fl.Phase), fl.Message)
		}
	}
	return why
}

// nodes brings the units up to the nodes of Workflow w.
func (f *follower) nodes(w *wfv1.Workflow, pods map[string]*corev1.Pod) {
	walk(f.Flow, w, func(s *plan.Step, index int, top wfv1.NodeStatus, attempts []wfv1.NodeStatus) {
		if u := f.byKey[unitKey(s.Name, index)]; u != nil && !f.Final(u.Unit) {
			f.node(u, w, top, attempts, pods)
		}
	})
}

// walk calls fn for each node of Workflow w that runs a step of flow, or one
// item of a foreach step (index, else -1): a Pod node, or a Retry node whose
// Pod children are its attempts (attempts holds the Pod node itself when
// there is no Retry node).
//
// A split flow's parent (emit/argo's IsParent) runs no step: its nodes
// create its parts' Workflows, whose nodes run the steps.
func walk(flow *plan.Flow, w *wfv1.Workflow, fn func(s *plan.Step, index int, top wfv1.NodeStatus, attempts []wfv1.NodeStatus)) {
	if eargo.IsParent(w) {
		return
	}
	parent := map[string]string{}
	for id, n := range w.Status.Nodes {
		for _, ch := range n.Children {
			parent[ch] = id
		}
	}
	for id, n := range w.Status.Nodes {
		if n.Type != wfv1.NodeTypePod && n.Type != wfv1.NodeTypeRetry {
			continue
		}
		if p, ok := w.Status.Nodes[parent[id]]; ok && p.Type == wfv1.NodeTypeRetry {
			continue // an attempt, seen from its retry node
		}
		if task, _, _ := strings.Cut(n.DisplayName, "("); strings.HasSuffix(task, eargo.ServiceSuffix) {
			continue // the Service of a multi-node step, which its Job's task follows
		}
		s := flow.Step(eargo.StepOfNode(&n))
		if s == nil || s.Nodes <= 1 && n.TemplateName != s.Name {
			continue // not a step's: a container step's template is named after it
		}
		index := -1
		if s.Nodes <= 1 && (len(s.Foreach) > 0 || s.ForeachOf != nil) {
			if n.Inputs == nil {
				continue
			}
			p := n.Inputs.GetParameterByName(eargo.InputIndex)
			if p == nil || p.Value == nil {
				continue
			}
			var err error
			if index, err = strconv.Atoi(p.Value.String()); err != nil || index < 0 {
				continue
			}
		}
		attempts := []wfv1.NodeStatus{n}
		if n.Type == wfv1.NodeTypeRetry {
			attempts = attempts[:0]
			for _, ch := range n.Children {
				if a, ok := w.Status.Nodes[ch]; ok && a.Type == wfv1.NodeTypePod {
					attempts = append(attempts, a)
				}
			}
		}
		fn(s, index, n, attempts)
	}
}

// node brings unit u up to its node top and top's attempts.
//
// Argo's controller retries a failed attempt itself, yet the follower tells
// it through dag.Run.Retry, then Start for the attempt that follows, as a
// runtime's own retry, and not through Retried: the retryStrategy emit/argo
// writes waits the step's RetryBackoff, doubling, as dag.Backoff reckons it,
// so "retrying in" names the delay Argo keeps before the attempt seen next;
// a step without RetryBackoff waits Kubernetes' Job delay, which Retry leaves
// untold ("retrying"). Argo's limit is the step's Retry, so Retry never ends a
// unit that Argo goes on retrying.
func (f *follower) node(u *unit, w *wfv1.Workflow, top wfv1.NodeStatus, attempts []wfv1.NodeStatus, pods map[string]*corev1.Pod) {
	for k := u.attempts; k < len(attempts); k++ {
		if k > 0 {
			msg, _, code := f.failure(u, w, attempts[k-1], pods)
			f.Retry(u.Unit, msg, code)
			if f.Final(u.Unit) {
				return
			}
		}
		f.Start(u.Unit)
		u.attempts = k + 1
	}
	if len(attempts) == 0 {
		return
	}
	cur := attempts[len(attempts)-1]
	p := pods[cur.ID]
	nodeName, pod := cur.HostNodeName, podName(w, cur)
	if p != nil && p.Spec.NodeName != "" {
		nodeName = p.Spec.NodeName
	}
	if nodeName != "" && f.Task(u.Unit).Node != nodeName {
		f.Amend(u.Unit, func(t *record.Task) { t.Node = nodeName })
	}
	f.Locked(func() { u.pod, u.node = pod, nodeName })
	if p != nil {
		if at, ok := runningSince(p); ok && u.running < u.attempts {
			u.running = u.attempts
			f.Running(u.Unit, at)
		}
		f.logs.Follow(p, u.Label, u.Step.Name, u.Index)
	}
	switch top.Phase {
	case wfv1.NodeSucceeded:
		f.Succeed(u.Unit, func(t *record.Task) {
			t.Attempts, t.ExitCode, t.Node, t.Pods = len(attempts), new(0), nodeName, []string{pod}
		})
	case wfv1.NodeFailed, wfv1.NodeError:
		msg, reason, code := f.failure(u, w, cur, pods)
		f.Update(u.Unit, func(t *record.Task) {
			t.Attempts, t.Node, t.Pods = len(attempts), nodeName, []string{pod}
		})
		if f.stopping {
			f.Interrupt(u.Unit, "stopped: "+firstLine(msg))
			return
		}
		f.Fail(u.Unit, msg, reason, code)
	}
}

// runningSince returns when pod p's step container started running.
func runningSince(p *corev1.Pod) (time.Time, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != plan.ContainerName {
			continue
		}
		switch {
		case cs.State.Running != nil:
			return cs.State.Running.StartedAt.Time, true
		case cs.State.Terminated != nil:
			return cs.State.Terminated.StartedAt.Time, true
		}
	}
	if p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		if p.Status.StartTime != nil {
			return p.Status.StartTime.Time, true
		}
	}
	return time.Time{}, false
}

// failure says why the attempt of u that node a ran failed: as run --kube says
// it of the attempt's pod (cluster.PodFailure), with its last log lines; from
// Argo's node when the pod was never seen.
func (f *follower) failure(u *unit, w *wfv1.Workflow, a wfv1.NodeStatus, pods map[string]*corev1.Pod) (string, string, *int) {
	p := pods[a.ID]
	if p == nil {
		msg := "pod " + podName(w, a)
		if a.HostNodeName != "" {
			msg += " on node " + a.HostNodeName
		}
		msg += ": " + string(a.Phase)
		if a.Message != "" {
			msg += ": " + a.Message
		}
		return msg, string(a.Phase), nil
	}
	msg, reason, code := cluster.PodFailure(p, u.Step)
	if code == nil && a.Message != "" {
		msg += " (Argo: " + a.Message + ")"
	}
	if tail := f.logs.Tail(context.Background(), p); tail != "" {
		msg += "\n" + tail
	}
	return msg, reason, code
}

// view is the live view: one row per unit, with its pod and node.
func (f *follower) view(now time.Time) (string, []string, [][]string) {
	byUnit := map[*dag.Unit]*unit{}
	f.unitsMu.Lock()
	for _, u := range f.units {
		byUnit[u.Unit] = u
	}
	f.unitsMu.Unlock()
	return f.UnitView(now, []string{"POD", "NODE"}, func(du *dag.Unit, t record.Task) []string {
		u := byUnit[du]
		return []string{u.pod, u.node}
	})
}

// stopLogs ends the informers and the log streams, waiting a moment for them
// to write what they read.
func (f *follower) stopLogs() {
	f.logs.Stop()
	f.logStop()
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
