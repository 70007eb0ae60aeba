package argo_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/argolint"
	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// argoFile is the argo target's <flow>.argo.yaml, decoded: each document's
// size, and the WorkflowTemplates by name.
type argoFile struct {
	data      []byte
	sizes     []int
	templates map[string]*wfv1.WorkflowTemplate
	order     []string // the WorkflowTemplates' names, as the file has them
	kinds     []string
}

func emitArgo(t *testing.T, p *plan.Flow) *argoFile {
	t.Helper()
	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	e := &argoFile{data: files[0].Data, templates: map[string]*wfv1.WorkflowTemplate{}}
	docs := bytes.Split(files[0].Data, []byte("\n---\n"))
	for _, doc := range docs[1:] { // the header comment first
		doc = append(doc, '\n')
		e.sizes = append(e.sizes, len(doc))
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		e.kinds = append(e.kinds, meta.Kind)
		if meta.Kind != "WorkflowTemplate" {
			continue
		}
		var wt wfv1.WorkflowTemplate
		if err := yaml.UnmarshalStrict(doc, &wt); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		e.templates[wt.Name] = &wt
		e.order = append(e.order, wt.Name)
	}
	return e
}

// checkSplit checks the split of p as argoFile: every document within
// argo_max_bytes and PartMaxBytes; the parts numbered from 1 and named after
// the flow, each at most PartNodes nodes (a part of one step, at most
// PartMaxNodes); every step in exactly one part,
// waiting there for the steps of the part it waits for; and the parent, named
// as the flow, running each part after exactly the parts holding the steps
// its steps wait for, the parts forming a DAG in the file's order. It returns
// the part of each step.
func checkSplit(t *testing.T, p *plan.Flow, e *argoFile) map[string]int {
	t.Helper()
	limit := p.ArgoMaxBytes
	if limit == 0 {
		limit = plan.DefaultArgoMaxBytes
	}
	for i, n := range e.sizes {
		if n > min(limit, argo.PartMaxBytes) {
			t.Errorf("document %d (%s) is %d bytes, more than %d", i, e.kinds[i], n, min(limit, argo.PartMaxBytes))
		}
	}
	parent := e.templates[p.Name]
	if parent == nil {
		t.Fatalf("no parent WorkflowTemplate %s among %v", p.Name, e.order)
	}
	if e.order[len(e.order)-1] != p.Name {
		t.Errorf("the parent is not the last WorkflowTemplate: %v", e.order)
	}
	parts := len(e.order) - 1
	if parts < 2 {
		t.Fatalf("%d parts", parts)
	}
	steps := map[string]*plan.Step{}
	for i := range p.Steps {
		steps[p.Steps[i].Name] = &p.Steps[i]
	}
	partOf := map[string]int{}
	for n := 1; n <= parts; n++ {
		name := argo.PartName(p.Name, n)
		if e.order[n-1] != name {
			t.Fatalf("WorkflowTemplate %d is %s, want %s", n, e.order[n-1], name)
		}
		wt := e.templates[name]
		if wt.Labels[argo.LabelPart] != strconv.Itoa(n) || wt.Labels[plan.LabelFlow] != p.Name {
			t.Errorf("part %d labels %v", n, wt.Labels)
		}
		nodes, partSteps := 2, 0
		var dag *wfv1.DAGTemplate
		for _, tpl := range wt.Spec.Templates {
			if tpl.Name == argo.Entrypoint {
				dag = tpl.DAG
			}
		}
		inPart := map[string]bool{}
		for _, tk := range dag.Tasks {
			inPart[argo.StepOfTask(tk.Name)] = true
		}
		for _, tk := range dag.Tasks {
			s := steps[argo.StepOfTask(tk.Name)]
			if s == nil {
				t.Fatalf("part %d task %s runs no step", n, tk.Name)
			}
			if strings.HasSuffix(tk.Name, argo.ServiceSuffix) {
				continue
			}
			if q, ok := partOf[s.Name]; ok {
				t.Errorf("step %s is in parts %d and %d", s.Name, q, n)
			}
			partOf[s.Name] = n
			partSteps++
			nodes += argo.StepNodes(p, s)
			var want []string
			for _, a := range s.After {
				if inPart[a] {
					want = append(want, argo.TaskName(a))
				}
			}
			got := tk.Depends
			if p.ArgoMultiNode == plan.ArgoJob && s.Nodes > 1 {
				got = "" // the Job's task waits for its Service's
			}
			if got != strings.Join(want, " && ") {
				t.Errorf("part %d: task %s depends %q, want %q", n, tk.Name, tk.Depends, strings.Join(want, " && "))
			}
		}
		if most := argo.PartNodes; nodes > most && (partSteps > 1 || nodes > argo.PartMaxNodes) {
			t.Errorf("part %d has %d nodes in %d steps, more than %d", n, nodes, partSteps, most)
		}
	}
	if len(partOf) != len(p.Steps) {
		t.Errorf("%d steps in parts, want %d", len(partOf), len(p.Steps))
	}
	if diff := cmp.Diff(parent.Spec.Arguments, e.templates[argo.PartName(p.Name, 1)].Spec.Arguments, cmpEquateParams()); diff != "" && p.Artifacts == nil {
		t.Errorf("a part's params are not the parent's (-parent +part):\n%s", diff)
	}
	wantAfter := map[int]map[int]bool{}
	for _, s := range p.Steps {
		for _, a := range s.After {
			if q, n := partOf[a], partOf[s.Name]; q != n {
				if wantAfter[n] == nil {
					wantAfter[n] = map[int]bool{}
				}
				wantAfter[n][q] = true
			}
		}
	}
	var dag *wfv1.DAGTemplate
	for _, tpl := range parent.Spec.Templates {
		if tpl.Name == argo.Entrypoint {
			dag = tpl.DAG
		}
	}
	if len(dag.Tasks) != parts {
		t.Fatalf("the parent has %d tasks for %d parts", len(dag.Tasks), parts)
	}
	for i, tk := range dag.Tasks {
		n := i + 1
		if tk.Name != argo.PartTask(n) {
			t.Errorf("parent task %d is %s", n, tk.Name)
		}
		var want []string
		for _, q := range slices.Sorted(maps.Keys(wantAfter[n])) {
			if q >= n {
				t.Errorf("part %d waits for part %d, after it", n, q)
			}
			want = append(want, argo.PartTask(q))
		}
		if tk.Depends != strings.Join(want, " && ") {
			t.Errorf("parent task %s depends %q, want %q", tk.Name, tk.Depends, strings.Join(want, " && "))
		}
	}
	return partOf
}

func cmpEquateParams() cmp.Option {
	return cmp.Transformer("param", func(a wfv1.AnyString) string { return string(a) })
}

// TestSplitFlowsOfAnySize: flows past a part's bytes (chains and fan-outs of
// thousands of generated steps, every kind of step) or its nodes (a fan-out of
// small steps, foreach items) are split into parts that keep every limit and
// every order between steps.
func TestSplitFlowsOfAnySize(t *testing.T) {
	for _, f := range []*sdk.Flow{
		benchflow.Flow(benchflow.Chain, 1500, benchflow.Options{}),
		benchflow.Flow(benchflow.FanOut, 5000, benchflow.Options{}),
		benchflow.Flow(benchflow.FanOut, 2000, benchflow.Options{SingleNode: true}),
		smallSteps(900),
	} {
		t.Run(f.Name(), func(t *testing.T) {
			p := mustCompile(t, f)
			checkSplit(t, p, emitArgo(t, p))
		})
	}
}

// smallSteps is a fan-out of n steps that write little each: its
// WorkflowTemplate fits, its nodes do not.
func smallSteps(n int) *sdk.Flow {
	f := sdk.NewFlow(fmt.Sprintf("small-%d", n), sdk.Image("busybox"))
	f.Step("first", sdk.Command("true"))
	for i := range n {
		f.Step(fmt.Sprintf("s%d", i), sdk.Command("true"), sdk.After("first"))
	}
	return f
}

// TestSplitByNodes: a flow whose WorkflowTemplate is within bytes but whose
// Workflow would have more than PartMaxNodes nodes is split; one just within
// both is not.
func TestSplitByNodes(t *testing.T) {
	p := mustCompile(t, smallSteps(900))
	e := emitArgo(t, p)
	if e.sizes[0]*2 > argo.PartMaxBytes {
		t.Fatalf("the parts are %d bytes: the flow is not split by nodes alone", e.sizes[0])
	}
	checkSplit(t, p, e)
	p = mustCompile(t, smallSteps(argo.PartMaxNodes-3)) // and first, the DAG, the Workflow
	if e := emitArgo(t, p); len(e.order) != 1 {
		t.Errorf("%d steps of %d nodes: split into %v", len(p.Steps), argo.PartMaxNodes, e.order)
	}
}

// TestSmallFlowsNotSplit: a flow within every limit is written as before: its
// one WorkflowTemplate, byte for byte what WorkflowTemplate builds.
func TestSmallFlowsNotSplit(t *testing.T) {
	for name, f := range lintFlows() {
		p := mustCompile(t, f)
		e := emitArgo(t, p)
		wt, errs := argo.WorkflowTemplate(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		if len(e.order) != 1 || !cmp.Equal(e.templates[e.order[0]], wt) {
			t.Errorf("%s: WorkflowTemplates %v, want %s as WorkflowTemplate builds it", name, e.order, wt.Name)
		}
	}
}

// TestCutKeepsBranchesApart: two independent chains, each the size of a
// part, are each a part of their own, neither waiting for the other.
func TestCutKeepsBranchesApart(t *testing.T) {
	f := sdk.NewFlow("branches", sdk.Image("busybox"))
	for i := range 10 {
		for _, b := range []string{"a", "b"} {
			var opts []sdk.StepOption
			if i > 0 {
				opts = append(opts, sdk.After(fmt.Sprint(b, i-1)))
			}
			f.Step(fmt.Sprint(b, i), append(opts, sdk.Command("true"))...)
		}
	}
	p := mustCompile(t, f)
	cost := slices.Repeat([]int{1}, len(p.Steps))
	parts := argo.Cut(p, cost, 10, argo.PartMaxNodes)
	if len(parts) != 2 {
		t.Fatalf("%d parts: %+v", len(parts), parts)
	}
	for _, part := range parts {
		branch := p.Steps[part.Steps[0]].Name[:1]
		for _, i := range part.Steps {
			if name := p.Steps[i].Name; name[:1] != branch {
				t.Errorf("part %d holds %s and %s", part.N, p.Steps[part.Steps[0]].Name, name)
			}
		}
		if len(part.After) > 0 {
			t.Errorf("part %d waits for parts %v", part.N, part.After)
		}
	}
	// Parts of one and a half chains: the second chain does not begin in the
	// first's part, where it would wait for the first to end.
	parts = argo.Cut(p, cost, 15, argo.PartMaxNodes)
	if len(parts) != 2 || len(parts[0].Steps) != 10 || len(parts[1].After) != 0 {
		t.Errorf("chains of 10 in parts of 15: %+v", parts)
	}
	// Parts smaller than a chain: each chain's parts wait only for the one
	// before, of the same chain.
	parts = argo.Cut(p, cost, 4, argo.PartMaxNodes)
	for _, part := range parts {
		branch := p.Steps[part.Steps[0]].Name[:1]
		for _, a := range part.After {
			if p.Steps[parts[a-1].Steps[0]].Name[:1] != branch || len(part.After) > 1 {
				t.Errorf("part %d (%v) waits for %v", part.N, part.Steps, part.After)
			}
		}
	}
}

// splitFlow is a small flow that a small argo_max_bytes splits into parts:
// params, artifacts, a foreach, a multi-node step, a schedule, and a fan-in
// across parts.
func splitFlow(t *testing.T, maxBytes int) *plan.Flow {
	t.Helper()
	f := sdk.NewFlow("splitme", sdk.Image("busybox"), sdk.Param("p", "a value: {{not a tag}}"), sdk.Param("epochs", "3"),
		sdk.Schedule("@daily"))
	f.Step("prepare", sdk.Command("sh", "-c", "echo $MANIFOLD_PARAM_P"))
	for _, b := range []string{"a", "b", "c"} {
		f.Step(b+"1", sdk.Command("true"), sdk.After("prepare"), sdk.Retry(1))
		f.Step(b+"2", sdk.Command("true"), sdk.After(b+"1"), sdk.Foreach("x", "y"))
		f.Step(b+"3", sdk.Command("true"), sdk.After(b+"2"))
	}
	f.Step("train", sdk.Command("torchrun"), sdk.After("a3"), sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8))
	f.Step("report", sdk.Command("true"), sdk.After("train", "b3", "c3"))
	p := mustCompile(t, f)
	p.ArgoMaxBytes = maxBytes
	p.Artifacts = &plan.Artifacts{URL: "s3://bucket/prefix"}
	return p
}

// TestSplitRunsTheParts: the parent creates each part's Workflow from the
// part's WorkflowTemplate, labelled with its own name and the part's number,
// passing every param and the run's ID, and waits for it to end; the
// CronWorkflow runs the parent.
func TestSplitRunsTheParts(t *testing.T) {
	p := splitFlow(t, 6000)
	e := emitArgo(t, p)
	partOf := checkSplit(t, p, e)
	if len(e.order) < 4 {
		t.Fatalf("%d parts, want 3 or more", len(e.order)-1)
	}
	if partOf["a1"] == partOf["b1"] && partOf["b1"] == partOf["c1"] {
		t.Errorf("the three branches share part %d", partOf["a1"])
	}
	if e.kinds[len(e.kinds)-1] != "CronWorkflow" || !strings.Contains(string(e.data), "workflowTemplateRef:\n      name: splitme\n") {
		t.Errorf("the CronWorkflow does not run the parent:\n%s", e.data)
	}
	parent := e.templates[p.Name]
	for _, tpl := range parent.Spec.Templates[1:] {
		r := tpl.Resource
		if r == nil || r.Action != "create" || !r.SetOwnerReference || r.SuccessCondition != argo.PartSuccess || r.FailureCondition != argo.PartFailure {
			t.Fatalf("parent template %s: %+v", tpl.Name, tpl)
		}
		// The params are read through toJson, which quotes them.
		m := r.Manifest
		for _, name := range []string{"p", "epochs"} {
			m = strings.ReplaceAll(m, "{{=toJson(workflow.parameters['"+name+"'])}}", `"`+name+`"`)
		}
		var wf wfv1.Workflow
		if err := yaml.UnmarshalStrict([]byte(m), &wf); err != nil {
			t.Fatalf("%s manifest: %v\n%s", tpl.Name, err, r.Manifest)
		}
		n := strings.TrimPrefix(tpl.Name, "p")
		if wf.GenerateName != "{{workflow.name}}-p"+n+"-" || wf.Labels[argo.LabelParentWorkflow] != "{{workflow.name}}" || wf.Labels[argo.LabelPart] != n {
			t.Errorf("%s creates %+v", tpl.Name, wf.ObjectMeta)
		}
		k, _ := strconv.Atoi(n)
		if wf.Spec.WorkflowTemplateRef.Name != argo.PartName(p.Name, k) {
			t.Errorf("%s runs %s", tpl.Name, wf.Spec.WorkflowTemplateRef.Name)
		}
		var params []string
		for _, a := range wf.Spec.Arguments.Parameters {
			params = append(params, a.Name+"="+a.Value.String())
		}
		want := []string{"p=p", "epochs=epochs", argo.ParamTraceParent + "={{workflow.parameters." + argo.ParamTraceParent + "}}", argo.ParamRunID + "={{workflow.name}}"}
		if diff := cmp.Diff(want, params); diff != "" {
			t.Errorf("%s params (-want +got):\n%s", tpl.Name, diff)
		}
	}
	// Each part's steps keep the run's ID of the parent's Workflow.
	child := e.templates[argo.PartName(p.Name, 1)]
	if !strings.Contains(fmt.Sprint(child.Spec.Templates), "{{workflow.parameters."+argo.ParamRunID+"}}") {
		t.Errorf("part 1's steps do not take the parent's run ID")
	}
}

// TestSplitAcceptedByArgoLint: Argo's validator accepts the parent, the parts,
// the CronWorkflow, and the Workflows the parent creates (substituted by
// Argo's own code), resolving their workflowTemplateRef to the parts.
func TestSplitAcceptedByArgoLint(t *testing.T) {
	dir := t.TempDir()
	p := splitFlow(t, 6000)
	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	path := filepath.Join(dir, "split.argo.yaml")
	if err := os.WriteFile(path, files[0].Data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := argolint.Run(t, path); !ok {
		t.Fatalf("Argo's validator refuses the split flow:\n%s", out)
	}
	out, ok := argolint.Manifests(t, "0123456789abcdef", path)
	if !ok {
		t.Fatalf("argolint -manifests: %s", out)
	}
	if n := strings.Count(out, `"kind":"Workflow"`); n < 3 {
		t.Fatalf("the parent creates %d Workflows:\n%s", n, out)
	}
	var workflows []string
	for doc := range strings.SplitSeq(out, "\n---\n") {
		if strings.Contains(doc, `"kind":"Workflow"`) {
			workflows = append(workflows, doc)
		}
	}
	created := filepath.Join(dir, "created.yaml")
	if err := os.WriteFile(created, []byte(strings.Join(workflows, "\n---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := argolint.Run(t, path, created); !ok {
		t.Errorf("Argo's validator refuses the Workflows the parent creates:\n%s", out)
	}
}

// foreachSteps is a flow of one foreach step of items items, after a step,
// and, when others is set, others small steps beside it: then the flow is
// split by nodes whatever the foreach.
func foreachSteps(items, others int) *sdk.Flow {
	f := sdk.NewFlow(fmt.Sprintf("fe-%d-%d", items, others), sdk.Image("busybox"))
	f.Step("first", sdk.Command("true"))
	all := make([]string, items)
	for i := range all {
		all[i] = strconv.Itoa(i)
	}
	f.Step("fan", sdk.Command("true"), sdk.After("first"), sdk.Foreach(all...))
	for i := range others {
		f.Step(fmt.Sprintf("s%d", i), sdk.Command("true"), sdk.After("first"))
	}
	return f
}

// TestForeachPastPartNodes: a foreach step is one task of Argo's DAG, so its
// items cannot be cut over parts. A step of more nodes than a part holds
// (PartNodes) makes a part of its own, of at most PartMaxNodes nodes, what
// one Workflow of a flow that is not split may have; a step past that is
// refused, naming the step, its items and nodes, the limit and what to do,
// whether the flow is split for its other steps or for this step alone.
func TestForeachPastPartNodes(t *testing.T) {
	// The most items a step may have: its items and group node, with the
	// part's DAG and Workflow nodes, make PartMaxNodes.
	most := argo.PartMaxNodes - 3
	for _, items := range []int{199, 200, 201, most} {
		for _, others := range []int{0, 600} {
			p := mustCompile(t, foreachSteps(items, others))
			e := emitArgo(t, p)
			if others == 0 {
				if items < most && len(e.order) != 1 {
					t.Errorf("%d items alone: split into %v", items, e.order)
				}
				continue
			}
			partOf := checkSplit(t, p, e)
			for s, n := range partOf {
				if s != "fan" && n == partOf["fan"] {
					t.Errorf("%d items: step %s shares part %d with the foreach", items, s, n)
				}
			}
		}
	}
	for _, items := range []int{most + 1, 499, 3000} {
		for _, others := range []int{0, 600} {
			p := mustCompile(t, foreachSteps(items, others))
			_, errs := emit.Files(argo.Target{}, p)
			if len(errs) != 1 {
				t.Errorf("%d items, %d other steps: errors %v; want the foreach step refused", items, others, errs)
				continue
			}
			nodes := argo.StepNodes(p, p.Step("fan"))
			for _, want := range []string{strconv.Itoa(items) + " foreach items", strconv.Itoa(nodes) + " nodes", strconv.Itoa(argo.PartMaxNodes), "--target job"} {
				if !strings.Contains(errs[0].Detail, want) {
					t.Errorf("%d items: %s: %s; want it to say %q", items, errs[0].Field, errs[0].Detail, want)
				}
			}
			if errs[0].Field != "steps[fan].foreach" {
				t.Errorf("%d items: the error is at %s, want steps[fan].foreach", items, errs[0].Field)
			}
		}
	}
}
