package argo

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/plan"
)

// A flow too large for one Workflow is split into parts. Argo keeps a running
// Workflow, its template (status.storedWorkflowTemplateSpec) and the status of
// every node, in one object, which its controller refuses past 1 MiB unless node
// status is offloaded to a database (a default install does not): so a flow runs
// as one WorkflowTemplate only while the template is at most PartMaxBytes (and
// argo_max_bytes) and its steps at most PartMaxNodes nodes. A larger flow is
// written as a parent WorkflowTemplate, named as the flow's one would be, whose
// DAG has a task per part; each task is a resource template that creates a
// Workflow of the part's own WorkflowTemplate (PartName) and waits for it to
// end. A part's task waits for the parts holding the steps its steps wait for,
// so a step that waits for a step of another part starts only once that whole
// part has succeeded.
const (
	// PartMaxBytes is the most bytes of YAML a part's WorkflowTemplate (and a
	// flow's one WorkflowTemplate) holds, when argo_max_bytes allows more: with
	// PartMaxNodes nodes of about 500 bytes of status each (503 measured under
	// Argo v3.7.18's controller, more with longer names), a running Workflow
	// stays near 700 KiB, under Argo's 1 MiB before it compresses node status
	// at all. Argo's controller also fetches the WorkflowTemplate once for
	// each of its templates when it first validates a Workflow, so a part's
	// cost there grows with the square of its size (docs/performance.md).
	PartMaxBytes = 384 << 10
	// PartMaxNodes is the most nodes a flow's one Workflow has in its status
	// before the flow is split: a pod per step (a foreach step's items, each
	// retry attempt of a retried step and its retry node counted); and the
	// most a part of a split flow has when one step alone is more than
	// PartNodes (a step of more is refused: see stepsTooLarge).
	PartMaxNodes = 500
	// PartNodes is the most nodes each part of a split flow has, but a part
	// of one step of more (see PartMaxNodes). Each time
	// Argo's controller takes up a running Workflow it works through every
	// node, and for each node not yet done resolves and encodes the whole DAG
	// template (its task list) again, so the work of one pass grows with the
	// square of a Workflow's nodes: 0.66 s for a part of 498 running steps and
	// 0.11 s for one of 200, measured with Argo v3.7.18's operator on the idle
	// 2-core development machine (docs/performance.md). With parts of at most
	// PartNodes, a pass over all of a large flow's parts costs in proportion
	// to the flow's steps, not to steps times the part's size.
	PartNodes = 200

	// LabelParentWorkflow, on a part's Workflow, names the Workflow of the
	// parent WorkflowTemplate that created it.
	LabelParentWorkflow = "manifold.dev/parent-workflow"
	// LabelPart, on a part's Workflow and WorkflowTemplate, is its number.
	LabelPart = "manifold.dev/part"
	// ParamRunID is the parameter through which the parent gives a part's
	// steps the run's ID (its own Workflow's name), with an artifact store,
	// so every part reads and writes the artifacts of one run. It begins with
	// "_", which a flow's param cannot.
	ParamRunID = "_manifold-run-id"

	// The conditions the parent's resource template waits for on a part's
	// Workflow.
	PartSuccess = "status.phase == Succeeded"
	PartFailure = "status.phase in (Failed,Error)"
)

// ParentRules are what the service account of a split flow's parent Workflow
// needs, besides Argo's executor role (create and patch workflowtaskresults):
// its resource templates create each part's Workflow and watch it until it
// ends. The parent runs as the service account every step shares, else the
// namespace's default.
func ParentRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{"argoproj.io"},
		Resources: []string{"workflows"},
		Verbs:     []string{"create", "get", "list", "watch"},
	}}
}

// PartName is the name of part n's WorkflowTemplate (n from 1) of the flow
// called flow.
func PartName(flow string, n int) string {
	return emit.Name(emit.MaxNameLength, flow, "p"+strconv.Itoa(n))
}

// PartTask is the name of part n's task (and template) in the parent.
func PartTask(n int) string { return "p" + strconv.Itoa(n) }

// Part is one part of a split flow.
type Part struct {
	// N numbers the part, from 1.
	N int
	// Steps are the indexes of the part's steps in the flow's Steps, in order.
	Steps []int
	// After are the numbers of the parts holding steps that a step of this
	// part waits for, ascending.
	After []int
}

// StepNodes is how many nodes step s can make in a Workflow's status: one per
// pod (each foreach item, each attempt of a retried step) or created object,
// a retry node over a retried step's attempts, and a group node over a foreach
// step's items. Items are known when the flow compiles, so each counts.
func StepNodes(f *plan.Flow, s *plan.Step) int {
	items := max(1, len(s.Foreach))
	group := 0
	if s.Foreach != nil {
		group = 1
	}
	switch {
	case s.Nodes > 1 && f.ArgoMultiNode == plan.ArgoJob:
		return 2 * (items + group) // the Service's task and the Job's
	case s.Nodes > 1:
		return 1 // one JobSet for every item, never retried by Argo
	case s.Retry > 0:
		return items*(s.Retry+2) + group
	}
	return items + group
}

// Cut returns the steps of f in parts of at most maxNodes nodes (StepNodes)
// and maxBytes bytes, where cost[i] is what step i adds to its part's
// WorkflowTemplate. It takes the steps in an order that keeps each step's
// dependencies before it and, where it can, runs a branch to its end before
// the next (a depth-first topological order), and cuts that order into
// consecutive runs: so every step is in one part, and a part waits only for
// parts before it. A chain (a step, and the steps after it that each wait for
// the one before alone and are its only followers) that does not fit in the
// rest of the current part begins the next, so that a branch is not cut where
// it need not be, and an independent branch does not wait for a part it has
// no need of; and a step that waits for a part the current one does not wait
// for yet begins the next part, so that the steps before it, in the current
// part, do not wait for that part too. A step that alone is over a limit makes
// a part of its own.
func Cut(f *plan.Flow, cost []int, maxBytes, maxNodes int) []Part {
	c := newCutter(f, cost, maxBytes, maxNodes)
	// A stack of the steps ready to take: the last made ready first.
	var ready []int
	for i := len(f.Steps) - 1; i >= 0; i-- {
		if c.waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		if c.begins(i) {
			c.parts = append(c.parts, Part{N: len(c.parts) + 1})
			c.bytes, c.nodes = 0, 0
			clear(c.waitsFor)
		}
		c.take(i)
		for _, k := range slices.Backward(c.next[i]) {
			if c.waiting[k]--; c.waiting[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
	c.linkParts()
	return c.parts
}

// A cutter is the state of Cut: the flow's graph, the parts cut so far and
// what the last of them holds.
type cutter struct {
	f                  *plan.Flow
	cost               []int
	maxBytes, maxNodes int
	index              map[string]int // step name → index
	// waiting counts the dependencies of each step not yet taken, deps all of
	// them; next lists the steps that wait for each step.
	waiting, deps []int
	next          [][]int
	stepNodes     []int
	// chainBytes and chainNodes are the cost of each step's chain, once known.
	chainBytes, chainNodes []int
	part                   []int // step → the part that took it
	parts                  []Part
	waitsFor               map[int]bool // the parts the current part waits for
	bytes, nodes           int          // what the current part holds
}

// newCutter indexes flow f's steps and their dependencies for Cut.
func newCutter(f *plan.Flow, cost []int, maxBytes, maxNodes int) *cutter {
	n := len(f.Steps)
	c := &cutter{
		f: f, cost: cost, maxBytes: maxBytes, maxNodes: maxNodes,
		index: make(map[string]int, n), waiting: make([]int, n), next: make([][]int, n),
		stepNodes: make([]int, n), chainBytes: make([]int, n), chainNodes: make([]int, n),
		part: make([]int, n), waitsFor: map[int]bool{},
	}
	for i := range f.Steps {
		c.index[f.Steps[i].Name] = i
	}
	for i := range f.Steps {
		for _, a := range f.Steps[i].After {
			if j, ok := c.index[a]; ok {
				c.waiting[i]++
				c.next[j] = append(c.next[j], i)
			}
		}
	}
	c.deps = slices.Clone(c.waiting)
	for i := range f.Steps {
		c.stepNodes[i] = StepNodes(f, &f.Steps[i])
	}
	return c
}

// chain works out the cost of step i's chain. A chain is a step and the steps
// after it that each wait for the one before alone, and are its only
// followers: a branch that a cut would make wait for a part it has no need of.
func (c *cutter) chain(i int) {
	if c.chainBytes[i] > 0 {
		return
	}
	c.chainBytes[i], c.chainNodes[i] = max(c.cost[i], 1), c.stepNodes[i]
	if len(c.next[i]) == 1 && c.deps[c.next[i][0]] == 1 {
		k := c.next[i][0]
		c.chain(k)
		c.chainBytes[i] += c.chainBytes[k]
		c.chainNodes[i] += c.chainNodes[k]
	}
}

// continues reports whether step i is in the chain of the step it waits for.
func (c *cutter) continues(i int) bool {
	after := c.f.Steps[i].After
	return len(after) == 1 && len(c.next[c.index[after[0]]]) == 1
}

// begins reports whether step i begins a new part: the first, or when it, or
// the chain it begins, does not fit in the rest of the current part, or when
// it waits for a part the current one does not wait for yet.
func (c *cutter) begins(i int) bool {
	if len(c.parts) == 0 {
		return true
	}
	// A chain that does not fit in the rest of this part begins the next.
	starts := !c.continues(i)
	if starts {
		c.chain(i)
		starts = c.bytes+c.chainBytes[i] > c.maxBytes || c.nodes+c.chainNodes[i] > c.maxNodes
	}
	// A step that waits for a part this one does not wait for yet begins
	// the next: the steps here have no need to wait for it.
	joins := slices.ContainsFunc(c.f.Steps[i].After, func(a string) bool {
		q := c.part[c.index[a]]
		return q != len(c.parts) && !c.waitsFor[q]
	})
	return starts || joins || c.bytes+c.cost[i] > c.maxBytes || c.nodes+c.stepNodes[i] > c.maxNodes
}

// take puts step i in the current part.
func (c *cutter) take(i int) {
	for _, a := range c.f.Steps[i].After {
		if q := c.part[c.index[a]]; q != len(c.parts) {
			c.waitsFor[q] = true
		}
	}
	p := &c.parts[len(c.parts)-1]
	p.Steps = append(p.Steps, i)
	c.part[i] = p.N
	c.bytes += c.cost[i]
	c.nodes += c.stepNodes[i]
}

// linkParts sorts each part's steps and lists the parts it waits for.
func (c *cutter) linkParts() {
	for k := range c.parts {
		p := &c.parts[k]
		slices.Sort(p.Steps)
		for _, i := range p.Steps {
			for _, a := range c.f.Steps[i].After {
				if q := c.part[c.index[a]]; q != p.N && !slices.Contains(p.After, q) {
					p.After = append(p.After, q)
				}
			}
		}
		slices.Sort(p.After)
	}
}

// maxBytes is the most bytes f's argo_max_bytes lets one WorkflowTemplate
// hold; -1 for no limit.
func maxBytes(f *plan.Flow) int {
	if f.ArgoMaxBytes == 0 {
		return plan.DefaultArgoMaxBytes
	}
	return f.ArgoMaxBytes
}

// size is the bytes of obj's YAML document, as the file holds it.
func size(obj any) (int, error) {
	data, err := encode.YAML("", obj)
	return len(data), err
}

// flowNodes is the most nodes the Workflow of f's one WorkflowTemplate has:
// its steps' and the DAG's and the Workflow's own.
func flowNodes(f *plan.Flow) int {
	n := 2
	for i := range f.Steps {
		n += StepNodes(f, &f.Steps[i])
	}
	return n
}

// split returns, for a flow whose WorkflowTemplate wt (of size bytes) is too
// large to run as one, the parts' WorkflowTemplates and the parent; or nil
// when wt runs as it is.
func split(f *plan.Flow, wt *wfv1.WorkflowTemplate, wtSize int) ([]*wfv1.WorkflowTemplate, field.ErrorList) {
	if !needsSplit(f, wtSize) {
		return nil, nil
	}
	limit := maxBytes(f)
	var out []*wfv1.WorkflowTemplate
	m := newMaker(f, wt.Name, nil, RunID, false)
	errs := cutParts(f, m, wtSize, func(parts []Part) (int, int, field.ErrorList) {
		children, over, n, errs := buildParts(m, parts, min(limit, PartMaxBytes))
		if len(errs) > 0 || over >= 0 {
			return over, n, errs
		}
		parent, err := parentTemplate(f, wt, parts)
		if err != nil {
			return -1, 0, field.ErrorList{field.InternalError(nil, err)}
		}
		n, err = size(parent)
		if err != nil {
			return -1, 0, field.ErrorList{field.InternalError(nil, err)}
		}
		if errs := parentTooLarge(f, parts, n); len(errs) > 0 {
			return -1, 0, errs
		}
		out = append([]*wfv1.WorkflowTemplate{parent}, children...)
		return -1, 0, nil
	})
	return out, errs
}

// needsSplit reports whether f, whose one WorkflowTemplate is wtSize bytes,
// is split into parts: see PartMaxBytes.
func needsSplit(f *plan.Flow, wtSize int) bool {
	limit := maxBytes(f)
	if limit < 0 {
		return false // no limit: the cluster keeps large objects (and offloads node status)
	}
	return wtSize > min(limit, PartMaxBytes) || flowNodes(f) > PartMaxNodes
}

// cutParts cuts f, whose one WorkflowTemplate (of m, which makes it) is wtSize
// bytes (-1: measured here), into parts, and calls try with them, which makes
// the parts (and, when all fit, the parent) and returns the index of the
// first part over the budget and its size (-1 when none is). Costs are
// estimates, read from the one WorkflowTemplate; while a part is over budget
// once made, the flow is cut again, smaller.
func cutParts(f *plan.Flow, m *maker, wtSize int, try func([]Part) (over, size int, errs field.ErrorList)) field.ErrorList {
	if errs := stepsTooLarge(f); len(errs) > 0 {
		return errs
	}
	if s := f.Dynamic(); s != nil {
		// A part's tasks could not read the outputs of another part's.
		return field.ErrorList{field.Forbidden(stepPath(s).Child(dynamicOption(s)), fmt.Sprintf(
			"flow %s is too large for one WorkflowTemplate (%d nodes, at most %d; or over %d bytes) and would be split into parts, whose tasks cannot read what another part's steps publish; a dynamic flow on Argo must fit in one WorkflowTemplate: fewer or smaller steps, or a fan-out at run time (sdk.ForeachOf) in place of a large static foreach",
			f.Name, flowNodes(f), PartMaxNodes, min(maxBytes(f), PartMaxBytes)))}
	}
	budget := min(maxBytes(f), PartMaxBytes)
	cost, fixed, errs := m.costs(wtSize)
	if len(errs) > 0 {
		return errs
	}
	target := budget - fixed - budget/16
	for range 8 {
		parts := Cut(f, cost, target, PartNodes-2)
		over, n, errs := try(parts)
		if len(errs) > 0 {
			return errs
		}
		if over < 0 {
			return nil
		}
		if len(parts[over].Steps) == 1 {
			s := &f.Steps[parts[over].Steps[0]]
			return field.ErrorList{field.Forbidden(stepPath(s), fmt.Sprintf(
				"the WorkflowTemplate of this step alone is %d bytes, more than the %d bytes a part of the flow may hold (argo_max_bytes, at most %d); make the step smaller (fewer foreach items, shorter values), compile with --target job, jobset or airflow, or raise argo_max_bytes in manifold.toml (-1 for no limit and no split)",
				n, budget, PartMaxBytes))}
		}
		target = target * 4 / 5
	}
	return field.ErrorList{field.InternalError(field.NewPath("steps"), fmt.Errorf("no cut of the flow into parts of at most %d bytes was found", budget))}
}

// stepsTooLarge refuses, in a flow that is split, each step of more nodes
// (StepNodes) than one Workflow may have. A step is one task of a part's DAG:
// its foreach items cannot be cut over parts, so a step of more nodes than a
// part holds (PartNodes) makes a part of its own, and such a part, with its
// DAG and Workflow nodes, holds at most PartMaxNodes, as the one Workflow of a
// flow that is not split does.
func stepsTooLarge(f *plan.Flow) field.ErrorList {
	var errs field.ErrorList
	for i := range f.Steps {
		s := &f.Steps[i]
		n := StepNodes(f, s)
		if n+2 <= PartMaxNodes {
			continue
		}
		at, what := stepPath(s).Child("retry"), fmt.Sprintf("step's %d attempts make %d nodes", s.Retry+1, n)
		if s.Foreach != nil {
			at, what = stepPath(s).Child("foreach"), fmt.Sprintf("step's %d foreach items make %d nodes", len(s.Foreach), n)
		}
		errs = append(errs, field.Forbidden(at, fmt.Sprintf(
			"the %s of Argo's workflow status (a pod per item and attempt, argo.StepNodes), and with its part's DAG and Workflow nodes more than the %d nodes one Workflow may have (argo.PartMaxNodes): a foreach is one task of Argo's DAG, so its items are never cut over parts; give the step fewer items (spread them over steps of at most %d items each), compile with --target job, jobset or airflow, or set argo_max_bytes = -1 in manifold.toml for a cluster that offloads node status (the flow is then never split)",
			what, PartMaxNodes, maxItems(f, s))))
	}
	return errs
}

// maxItems is the most foreach items step s may have for its nodes and its
// part's to be at most PartMaxNodes.
func maxItems(f *plan.Flow, s *plan.Step) int {
	t := *s
	t.Foreach = make([]string, 0, PartMaxNodes)
	for StepNodes(f, &t)+2 <= PartMaxNodes {
		t.Foreach = append(t.Foreach, "")
	}
	return max(0, len(t.Foreach)-1)
}

// parentTooLarge refuses a parent of size bytes over argo_max_bytes.
func parentTooLarge(f *plan.Flow, parts []Part, size int) field.ErrorList {
	if limit := maxBytes(f); size > limit {
		return field.ErrorList{field.Forbidden(field.NewPath("steps"), fmt.Sprintf(
			"the flow's %d steps are split into %d parts, and the WorkflowTemplate that runs them is %d bytes, more than the %d bytes that argo_max_bytes allows; split the flow into flows of fewer steps, or raise argo_max_bytes in manifold.toml",
			len(f.Steps), len(parts), size, limit))}
	}
	return nil
}

// partRunID is the run ID of a part's steps.
func partRunID(f *plan.Flow) string {
	if f.Artifacts != nil {
		return paramTag(ParamRunID)
	}
	return RunID
}

// buildPart returns the WorkflowTemplate of part p of m's flow; in is
// scratch space, a flag per step.
func buildPart(m *maker, p Part, in []bool) (*wfv1.WorkflowTemplate, field.ErrorList) {
	f := m.f
	clear(in)
	for _, i := range p.Steps {
		in[i] = true
	}
	wt, errs := buildCarried(f, m.literal, PartName(f.Name, p.N), in, partRunID(f))
	if len(errs) > 0 {
		return nil, errs
	}
	wt.Labels[LabelPart] = strconv.Itoa(p.N)
	if f.Artifacts != nil {
		wt.Spec.Arguments.Parameters = append(wt.Spec.Arguments.Parameters, wfv1.Parameter{Name: ParamRunID, Value: wfv1.AnyStringPtr("")})
	}
	return wt, nil
}

// buildParts returns the WorkflowTemplate of each part, and the index of the
// first over budget bytes (-1 when none is) and its size.
func buildParts(m *maker, parts []Part, budget int) ([]*wfv1.WorkflowTemplate, int, int, field.ErrorList) {
	out := make([]*wfv1.WorkflowTemplate, len(parts))
	in := make([]bool, len(m.f.Steps))
	for k, p := range parts {
		wt, errs := buildPart(m, p, in)
		if len(errs) > 0 {
			return nil, 0, 0, errs
		}
		n, err := size(wt)
		if err != nil {
			return nil, 0, 0, field.ErrorList{field.InternalError(nil, err)}
		}
		out[k] = wt
		if n > budget {
			return out, k, n, nil
		}
	}
	return out, -1, 0, nil
}

// parentTemplate is the WorkflowTemplate that runs f's parts: named and
// labelled as f's one WorkflowTemplate, with its params, and the fields of wt
// (f's one WorkflowTemplate) that its resource templates' executor pods take:
// the service account, security context and pod metadata every step shares.
func parentTemplate(f *plan.Flow, wt *wfv1.WorkflowTemplate, parts []Part) (*wfv1.WorkflowTemplate, error) {
	spec := wfv1.WorkflowSpec{
		Entrypoint:         Entrypoint,
		Arguments:          wt.Spec.Arguments,
		ServiceAccountName: wt.Spec.ServiceAccountName,
		SecurityContext:    wt.Spec.SecurityContext,
		PodMetadata:        wt.Spec.PodMetadata,
	}
	dag := &wfv1.DAGTemplate{}
	spec.Templates = []wfv1.Template{{Name: Entrypoint, DAG: dag}}
	for _, p := range parts {
		m, err := manifest(f, partWorkflow(f, p.N))
		if err != nil {
			return nil, err
		}
		name := PartTask(p.N)
		spec.Templates = append(spec.Templates, resourceTemplate(name, m, PartSuccess, PartFailure))
		after := make([]string, len(p.After))
		for i, a := range p.After {
			after[i] = PartTask(a)
		}
		dag.Tasks = append(dag.Tasks, wfv1.DAGTask{Name: name, Template: name, Depends: strings.Join(after, " && ")})
	}
	return &wfv1.WorkflowTemplate{
		TypeMeta:   wt.TypeMeta,
		ObjectMeta: wt.ObjectMeta,
		Spec:       spec,
	}, nil
}

// partWorkflow is the Workflow of part n that the parent's task creates: of
// the part's WorkflowTemplate, labelled with the parent Workflow's name and the
// part's number, given the parent's params, its trace context (and the run's ID).
func partWorkflow(f *plan.Flow, n int) *wfv1.Workflow {
	var params []wfv1.Parameter
	for _, p := range f.Params {
		params = append(params, wfv1.Parameter{Name: p.Name, Value: wfv1.AnyStringPtr(paramTag(p.Name))})
	}
	params = append(params, wfv1.Parameter{Name: ParamTraceParent, Value: wfv1.AnyStringPtr(paramTag(ParamTraceParent))})
	if f.Artifacts != nil {
		params = append(params, wfv1.Parameter{Name: ParamRunID, Value: wfv1.AnyStringPtr(RunID)})
	}
	meta := objectMeta(f, "")
	meta.Namespace = ""
	meta.GenerateName = RunID + "-" + PartTask(n) + "-"
	meta.Labels[LabelParentWorkflow] = RunID
	meta.Labels[LabelPart] = strconv.Itoa(n)
	return &wfv1.Workflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Workflow"},
		ObjectMeta: meta,
		Spec: wfv1.WorkflowSpec{
			WorkflowTemplateRef: &wfv1.WorkflowTemplateRef{Name: PartName(f.Name, n)},
			Arguments:           wfv1.Arguments{Parameters: params},
		},
	}
}
