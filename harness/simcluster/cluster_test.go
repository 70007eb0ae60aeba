package simcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manifoldflow/manifold/catalog"
	"github.com/manifoldflow/manifold/plan"
)

// TestFakeNodes checks the live nodes: one per DefaultNodes entry and count,
// Ready, labelled with their instance type, with the catalog's accelerators and
// EFA interfaces allocatable and the taints EKS gives accelerator nodes.
func TestFakeNodes(t *testing.T) {
	c := Shared(t)
	list, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byType := map[string]int{}
	for _, n := range list.Items {
		typ := n.Labels[plan.LabelInstanceType]
		byType[typ]++
		if !nodeReady(&n) {
			t.Errorf("node %s is not Ready and untainted: %v %v", n.Name, n.Status.Conditions, n.Spec.Taints)
		}
		var taints []string
		for _, tn := range n.Spec.Taints {
			taints = append(taints, tn.Key+":"+string(tn.Effect))
		}
		alloc := func(name corev1.ResourceName) int64 {
			q := n.Status.Allocatable[name]
			return q.Value()
		}
		var want struct{ neuron, gpu, efa int64 }
		var wantTaints []string
		if typ != CPUInstanceType {
			inst, ok := catalog.Lookup(typ)
			if !ok {
				t.Errorf("node %s has instance type %q, not in the catalog", n.Name, typ)
				continue
			}
			want.neuron, want.gpu, want.efa = int64(inst.NeuronDevices()), int64(inst.GPUs()), int64(inst.EFA)
			if want.neuron > 0 {
				wantTaints = append(wantTaints, plan.ResourceNeuron+":NoSchedule")
			}
			if want.gpu > 0 {
				wantTaints = append(wantTaints, plan.ResourceNVIDIA+":NoSchedule")
			}
		}
		if got := alloc(plan.ResourceNeuron); got != want.neuron {
			t.Errorf("node %s: allocatable Neuron %d, want %d", n.Name, got, want.neuron)
		}
		if got := alloc(plan.ResourceNVIDIA); got != want.gpu {
			t.Errorf("node %s: allocatable GPUs %d, want %d", n.Name, got, want.gpu)
		}
		if got := alloc(plan.ResourceEFA); got != want.efa {
			t.Errorf("node %s: allocatable EFA %d, want %d", n.Name, got, want.efa)
		}
		if alloc(corev1.ResourceCPU) == 0 || alloc(corev1.ResourceMemory) == 0 || alloc(corev1.ResourcePods) == 0 {
			t.Errorf("node %s lacks cpu, memory or pods: %v", n.Name, n.Status.Allocatable)
		}
		if strings.Join(taints, ",") != strings.Join(wantTaints, ",") {
			t.Errorf("node %s: taints %v, want %v", n.Name, taints, wantTaints)
		}
	}
	for _, g := range DefaultNodes() {
		if byType[g.InstanceType] != g.Count {
			t.Errorf("%d %s nodes, want %d", byType[g.InstanceType], g.InstanceType, g.Count)
		}
	}
}

// trn1Pod is a pod template asking for a whole trn1.32xlarge.
func trn1Pod(labels map[string]any) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": labels},
		"spec": map[string]any{
			"nodeSelector": map[string]any{plan.LabelInstanceType: "trn1.32xlarge"},
			"tolerations":  []any{map[string]any{"key": plan.ResourceNeuron, "operator": "Exists", "effect": "NoSchedule"}},
			"containers": []any{map[string]any{
				"name": "main", "image": "busybox", "command": []any{"true"},
				"resources": map[string]any{
					"limits": map[string]any{plan.ResourceNeuron: "16", plan.ResourceEFA: "8"},
				},
			}},
		},
	}
}

// nodeType returns the instance type label of node name ("" for no node).
func nodeType(t *testing.T, c *Cluster, name string) string {
	t.Helper()
	if name == "" {
		return ""
	}
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Labels[plan.LabelInstanceType]
}

// waitFor polls get until done says the object is finished, failing t at timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, get func() (*unstructured.Unstructured, error), done func(*unstructured.Unstructured) bool) *unstructured.Unstructured {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *unstructured.Unstructured
	for time.Now().Before(deadline) {
		o, err := get()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		last = o
		if done(o) {
			return o
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last seen status: %v", what, last.Object["status"])
	return nil
}

func condition(o *unstructured.Unstructured, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

// TestJobSetController runs a JobSet of two pods, each taking a whole trn1 node,
// through the JobSet controller: its webhook fills in the defaults only it sets,
// both pods land on distinct trn1 nodes, and the JobSet completes.
func TestJobSetController(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": "pair"},
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": int64(1),
			"template": map[string]any{"spec": map[string]any{
				"parallelism": int64(2), "completions": int64(2), "backoffLimit": int64(0),
				// The pods run side by side (LabelRunFor): a pod kwok completed at
				// once would free its node's devices for the other.
				"template": trn1Pod(map[string]any{"test": "jobset", LabelRunFor: "5s"}),
			}},
		}}},
	}}
	created, err := c.Create(ctx, js, ns)
	if err != nil {
		t.Fatal(err)
	}
	if op, _, _ := unstructured.NestedString(created.Object, "spec", "successPolicy", "operator"); op != "All" {
		t.Errorf("JobSet webhook defaults missing: successPolicy.operator = %q, want All", op)
	}
	waitFor(t, "JobSet pair to complete", 2*time.Minute, func() (*unstructured.Unstructured, error) {
		return c.Dynamic.Resource(JobSetGVR).Namespace(ns).Get(ctx, "pair", metav1.GetOptions{})
	}, func(o *unstructured.Unstructured) bool {
		if condition(o, "Failed") {
			t.Fatalf("JobSet failed: %v", o.Object["status"])
		}
		return condition(o, "Completed")
	})
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "test=jobset"})
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		if typ := nodeType(t, c, p.Spec.NodeName); typ != "trn1.32xlarge" {
			t.Errorf("pod %s ran on %q, a %q node, want a trn1.32xlarge node", p.Name, p.Spec.NodeName, typ)
		}
		nodes[p.Spec.NodeName] = true
	}
	if len(pods.Items) != 2 || len(nodes) != 2 {
		t.Errorf("want 2 pods on 2 distinct nodes, got %d pods on %v", len(pods.Items), nodes)
	}
}

// argoTemplate is a two-step DAG: "a" on a CPU node, then "b" on a trn1 node;
// labels go on b's pod.
func argoTemplate(name string, bLabels map[string]any) *unstructured.Unstructured {
	container := func(cmd string) map[string]any {
		return map[string]any{"image": "busybox", "command": []any{"sh", "-c", cmd},
			"resources": map[string]any{"requests": map[string]any{"cpu": "100m"}}}
	}
	b := trn1Pod(bLabels)
	bSpec := b["spec"].(map[string]any)
	bContainer := bSpec["containers"].([]any)[0].(map[string]any)
	delete(bContainer, "name")
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "WorkflowTemplate",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"entrypoint": "main",
			"templates": []any{
				map[string]any{"name": "main", "dag": map[string]any{"tasks": []any{
					map[string]any{"name": "a", "template": "a"},
					map[string]any{"name": "b", "template": "b", "dependencies": []any{"a"}},
					map[string]any{"name": "c", "template": "a", "dependencies": []any{"b"}},
				}}},
				map[string]any{"name": "a", "container": container("true")},
				map[string]any{"name": "b", "container": bContainer,
					"metadata":     b["metadata"],
					"nodeSelector": bSpec["nodeSelector"], "tolerations": bSpec["tolerations"]},
			},
		},
	}}
}

// runWorkflow creates the template and a Workflow of it, and waits until the
// Workflow has finished.
func runWorkflow(t *testing.T, c *Cluster, ns string, tmpl *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Create(ctx, tmpl, ns); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	wf, err := c.RunFromTemplate(ctx, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Workflow",
		"metadata": map[string]any{"generateName": tmpl.GetName() + "-"},
		"spec":     map[string]any{"workflowTemplateRef": map[string]any{"name": tmpl.GetName()}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

// workflowNodes returns the Workflow's pod nodes by task name.
func workflowNodes(wf *unstructured.Unstructured) map[string]map[string]any {
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	out := map[string]map[string]any{}
	for _, n := range nodes {
		m, _ := n.(map[string]any)
		if m["type"] == "Pod" {
			out[m["displayName"].(string)] = m
		}
	}
	return out
}

// TestArgoController runs a three-step WorkflowTemplate through Argo's
// workflow-controller: it succeeds, each step starting only after the one before
// finished, the accelerator step on a trn1 node.
func TestArgoController(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	wf := runWorkflow(t, c, ns, argoTemplate("chain", map[string]any{"test": "argo"}))
	if phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase"); phase != "Succeeded" {
		t.Fatalf("Workflow phase %s, want Succeeded: %v", phase, wf.Object["status"])
	}
	nodes := workflowNodes(wf)
	for _, pair := range [][2]string{{"a", "b"}, {"b", "c"}} {
		before, after := nodes[pair[0]], nodes[pair[1]]
		if before == nil || after == nil {
			t.Fatalf("missing task nodes: %v", nodes)
		}
		if after["startedAt"].(string) < before["finishedAt"].(string) {
			t.Errorf("%s started at %v, before %s finished at %v", pair[1], after["startedAt"], pair[0], before["finishedAt"])
		}
	}
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "test=argo"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("want one pod of task b: %v %v", pods, err)
	}
	if typ := nodeType(t, c, pods.Items[0].Spec.NodeName); typ != "trn1.32xlarge" {
		t.Errorf("task b ran on %q, a %q node, want a trn1.32xlarge node", pods.Items[0].Spec.NodeName, typ)
	}
}

// TestArgoFailedStepStopsDependents labels the middle step to fail: the
// Workflow fails and the step after it never starts.
func TestArgoFailedStepStopsDependents(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	wf := runWorkflow(t, c, ns, argoTemplate("failing", map[string]any{LabelFail: "true"}))
	if phase, _, _ := unstructured.NestedString(wf.Object, "status", "phase"); phase != "Failed" {
		t.Fatalf("Workflow phase %s, want Failed", phase)
	}
	nodes := workflowNodes(wf)
	for name, n := range nodes {
		t.Logf("task %s: %v %v–%v %v", name, n["phase"], n["startedAt"], n["finishedAt"], n["message"])
	}
	if nodes["b"]["phase"] != "Failed" {
		t.Errorf("task b: phase %v, want Failed", nodes["b"]["phase"])
	}
	if n, ran := nodes["c"]; ran && n["phase"] != "Omitted" {
		t.Errorf("task c, after the failed b, has phase %v", n["phase"])
	}
}

// TestFailStage: a pod labelled LabelFail fails with exit code 1.
func TestFailStage(t *testing.T) {
	c := Shared(t)
	p := runBarePod(t, c, c.Namespace(t), "doomed", map[string]string{LabelFail: "true"})
	if p.Status.Phase != corev1.PodFailed {
		t.Fatalf("the labelled pod ended %s, want Failed", p.Status.Phase)
	}
	if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 1 {
		t.Errorf("failed pod's container status: %+v", st)
	}
}

// TestAirflowPodStage: a bare pod of Airflow's KubernetesPodOperator (labelled
// LabelPodOperator) completes with exit code 0, unless it is labelled to fail;
// a bare pod without the label is left running.
func TestAirflowPodStage(t *testing.T) {
	c := Shared(t)
	ns := c.Namespace(t)
	p := runBarePod(t, c, ns, "operated", map[string]string{LabelPodOperator: "True"})
	if p.Status.Phase != corev1.PodSucceeded {
		t.Errorf("the operator's pod ended %s, want Succeeded", p.Status.Phase)
	} else if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.ExitCode != 0 {
		t.Errorf("completed pod's container status: %+v", st)
	}
	if p := runBarePod(t, c, ns, "operated-doomed", map[string]string{LabelPodOperator: "True", LabelFail: "true"}); p.Status.Phase != corev1.PodFailed {
		t.Errorf("the operator's pod labelled to fail ended %s, want Failed", p.Status.Phase)
	}
	if p := runBarePod(t, c, ns, "unowned", nil); p.Status.Phase != corev1.PodRunning {
		t.Errorf("a bare pod without the operator's label ended %s, want it left Running", p.Status.Phase)
	}
}

// runBarePod creates a pod without owner, named name and labelled labels, and
// returns it once it has succeeded or failed, or when it has been Running for
// a few seconds without either.
func runBarePod(t *testing.T, c *Cluster, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "main", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
		}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const settle = 5 * time.Second
	var running time.Time
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded, corev1.PodFailed:
			return p
		case corev1.PodRunning:
			if running.IsZero() {
				running = time.Now()
			} else if time.Since(running) > settle {
				return p
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("pod %s did not run", name)
	return nil
}
