package airflow_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/harness/airflowtest"
	"github.com/manifoldflow/manifold/harness/kubevalidate"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// built collects the Jobs and Services Airflow built, for kubevalidate.
var built struct {
	sync.Mutex
	objects []any
}

func keep(objs ...any) {
	built.Lock()
	defer built.Unlock()
	built.objects = append(built.objects, objs...)
}

// connectionNamespace is the namespace dagcheck.py gives the Kubernetes connection
// where it tests one (CONNECTION_NAMESPACE).
const connectionNamespace = "connection-namespace"

// rankZero are the variables that hold rank 0's address, and what follows it.
var rankZero = map[string]string{plan.EnvMasterAddr: "", plan.EnvPETMasterAddr: "",
	plan.EnvNeuronRootComm: ":" + strconv.Itoa(plan.NeuronRootCommPort)}

// renderedServices reads the Services that a multi-node step's setup task creates,
// one per item, each in the namespace it goes to; its teardown task must render
// the same. It returns them and the namespace they go to when the Kubernetes
// connection names one.
func renderedServices(t *testing.T, create, remove airflowtest.Task, items int) ([]*corev1.Service, string) {
	t.Helper()
	if len(create.Instances) != 1 || len(remove.Instances) != 1 {
		t.Errorf("the Service tasks have %d and %d instances, want 1", len(create.Instances), len(remove.Instances))
		return nil, ""
	}
	c, r := create.Instances[0], remove.Instances[0]
	if c.Error != "" || r.Error != "" {
		t.Errorf("the Service tasks did not render:\n%s\n%s", c.Error, r.Error)
		return nil, ""
	}
	if c.YAMLConf != r.YAMLConf || c.Namespace != r.Namespace || c.ConnectionNamespace != r.ConnectionNamespace {
		t.Errorf("the teardown deletes other Services than the setup creates:\n%s (in %s)\n%s (in %s)", c.YAMLConf, c.Namespace, r.YAMLConf, r.Namespace)
	}
	var services []*corev1.Service
	for _, doc := range strings.Split(c.YAMLConf, "\n---\n") {
		svc := &corev1.Service{}
		if err := yaml.UnmarshalStrict([]byte(doc), svc); err != nil {
			t.Errorf("rendered Service: %v\n%s", err, doc)
			return nil, ""
		}
		if svc.Namespace == "" {
			svc.Namespace = c.Namespace
		}
		services = append(services, svc)
	}
	if len(services) != items {
		t.Errorf("%d Services for %d items", len(services), items)
		return nil, ""
	}
	keep(anySlice(services)...)
	return services, c.ConnectionNamespace
}

func anySlice[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// checkJob checks the Job that the Job operator builds for item i of multi-node
// step s, in the first try and the second, against its Service and the Job
// target's pod; servicesNamespace is where the Services go when the Kubernetes
// connection names a namespace.
func checkJob(t *testing.T, what string, s *step, i int, in airflowtest.Instance, svc *corev1.Service, servicesNamespace string) {
	t.Helper()
	j := in.Job
	if j == nil || in.RetryJob == nil {
		t.Errorf("%s: no Job", what)
		return
	}
	if !in.WaitUntilJobComplete {
		t.Errorf("%s: the task does not wait for its Job", what)
	}
	keep(j)
	n := int32(s.nodes)
	spec := j.Spec
	// Every node at once, ranked by its completion index; a node that fails fails
	// the Job, and Airflow's retries run a new one.
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion ||
		spec.Completions == nil || *spec.Completions != n || spec.Parallelism == nil || *spec.Parallelism != n ||
		spec.BackoffLimit == nil || *spec.BackoffLimit != 0 || spec.BackoffLimitPerIndex != nil {
		t.Errorf("%s: Job spec: mode %v, completions %v, parallelism %v, backoffLimit %v, per index %v; want an Indexed Job of %d pods at once, backoffLimit 0",
			what, val(spec.CompletionMode), val(spec.Completions), val(spec.Parallelism), val(spec.BackoffLimit), val(spec.BackoffLimitPerIndex), n)
	}
	if diff := cmp.Diff(s.timeout, spec.ActiveDeadlineSeconds); diff != "" {
		t.Errorf("%s: the Job's deadline is not the step's timeout, each try's (-want +got):\n%s", what, diff)
	}

	// The Service and the Job meet: same namespace (not the worker's own), the
	// pods' subdomain is the Service, which selects them, and rank 0's address
	// is the first pod's host name under it.
	namespace := s.namespace
	if namespace == "" {
		namespace = "default"
	}
	if j.Namespace != namespace || svc.Namespace != j.Namespace {
		t.Errorf("%s: Job in namespace %q, Service in %q; want both in %q", what, j.Namespace, svc.Namespace, namespace)
	}
	// With a namespace on the connection, both go there (or to the step's).
	namespace = s.namespace
	if namespace == "" {
		namespace = connectionNamespace
	}
	if in.ConnectionNamespace != namespace || servicesNamespace != namespace {
		t.Errorf("%s: with the connection's namespace %s, Job in namespace %q, Service in %q; want both in %q",
			what, connectionNamespace, in.ConnectionNamespace, servicesNamespace, namespace)
	}
	pod := j.Spec.Template
	if pod.Spec.Subdomain != svc.Name {
		t.Errorf("%s: pods' subdomain %q, Service %q", what, pod.Spec.Subdomain, svc.Name)
	}
	if len(svc.Spec.Selector) == 0 {
		t.Errorf("%s: the Service selects every pod", what)
	}
	for k, v := range svc.Spec.Selector {
		if pod.Labels[k] != v {
			t.Errorf("%s: the Service selects %s=%s, the pods have %q", what, k, v, pod.Labels[k])
		}
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("%s: Service is not headless or waits for readiness: %+v", what, svc.Spec)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != pod.Spec.Containers[0].Ports[0].ContainerPort {
		t.Errorf("%s: Service ports %+v, container ports %+v", what, svc.Spec.Ports, pod.Spec.Containers[0].Ports)
	}
	for _, msg := range validation.IsDNS1035Label(svc.Name) {
		t.Errorf("%s: Service name %q: %s", what, svc.Name, msg)
	}
	for _, jb := range []*batchv1.Job{j, in.RetryJob} {
		host := fmt.Sprintf("%s-%d", jb.Name, n-1)
		for _, msg := range validation.IsDNS1123Label(host) {
			t.Errorf("%s: the last node's host name %q: %s", what, host, msg)
		}
		checkRankZero(t, what, jb, svc, s.pods[i])
	}
	if in.RetryJob.Name == j.Name || in.RetryJob.Spec.Template.Spec.Subdomain != svc.Name {
		t.Errorf("%s: the second try's Job is %s under %s; want a new Job under %s", what, in.RetryJob.Name, in.RetryJob.Spec.Template.Spec.Subdomain, svc.Name)
	}
	compareJobPod(t, what, s, i, j, svc)
}

// checkRankZero checks that the variables holding rank 0's address, those the
// Job target's pod has, hold <job>-0.<service>.
func checkRankZero(t *testing.T, what string, j *batchv1.Job, svc *corev1.Service, want corev1.PodTemplateSpec) {
	t.Helper()
	addr := job.RankZero(j.Name, svc.Name)
	got := map[string]string{}
	for _, e := range j.Spec.Template.Spec.Containers[0].Env {
		if _, ok := rankZero[e.Name]; ok {
			got[e.Name] = e.Value
		}
	}
	wantEnv := map[string]string{}
	for _, e := range want.Spec.Containers[0].Env {
		if suffix, ok := rankZero[e.Name]; ok {
			wantEnv[e.Name] = addr + suffix
		}
	}
	if diff := cmp.Diff(wantEnv, got); diff != "" {
		t.Errorf("%s: rank 0's address in Job %s (-want +got):\n%s", what, j.Name, diff)
	}
}

// compareJobPod compares the pod template of the Job Airflow built with the Job
// target's, after removing the differences that are allowed, each checked first:
// those of every operator pod (operatorPod); the values of rank 0's address and
// the subdomain, which name this run's Job and Service (checkJob checks them);
// the template's name and namespace, which the operator sets and the Job
// controller does not use; LabelService, by which the Service selects the pods of
// every try; and the labels by which the operator finds its pods: dag_id, task_id,
// run_id, try_number, map_index, kubernetes_pod_operator, airflow_kpo_in_cluster.
func compareJobPod(t *testing.T, what string, s *step, i int, j *batchv1.Job, svc *corev1.Service) {
	t.Helper()
	want := *s.pods[i].DeepCopy()
	got := *j.Spec.Template.DeepCopy()
	operatorPod(t, what, &got)
	if got.Name != strings.TrimPrefix(j.Name, airflow.JobNamePrefix) || got.Namespace != j.Namespace {
		t.Errorf("%s: pod template named %s/%s in Job %s/%s", what, got.Namespace, got.Name, j.Namespace, j.Name)
	}
	got.Name, got.Namespace = "", ""
	wantLabels := map[string]string{
		airflow.LabelService: svc.Name, "dag_id": want.Labels[plan.LabelFlow], "task_id": want.Labels[plan.LabelStep],
		"try_number": "1", "kubernetes_pod_operator": "True", "airflow_kpo_in_cluster": "False",
	}
	if s.foreach {
		wantLabels["map_index"] = strconv.Itoa(i)
	}
	for k, v := range wantLabels {
		if got.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", what, k, got.Labels[k], v)
		}
		delete(got.Labels, k)
	}
	if got.Labels["run_id"] == "" {
		t.Errorf("%s: no run_id label", what)
	}
	delete(got.Labels, "run_id")
	runIDs(t, what, &want, &got)
	for _, p := range []*corev1.PodTemplateSpec{&want, &got} {
		p.Spec.Subdomain = ""
		for k := range p.Spec.Containers[0].Env {
			if e := &p.Spec.Containers[0].Env[k]; hasKey(rankZero, e.Name) {
				e.Value = ""
			}
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: the Job's pod differs from the Job target's (-job target +airflow):\n%s", what, diff)
	}
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func val[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// validateBuilt puts every Job and Service Airflow built through the API server's
// validation.
func validateBuilt(t *testing.T, dir string) {
	t.Helper()
	built.Lock()
	objs := built.objects
	built.Unlock()
	if len(objs) == 0 {
		t.Fatal("Airflow built no Jobs or Services")
	}
	data, err := encode.YAML("", objs...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "airflow-built.yaml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := kubevalidate.Run(t, path); !ok {
		t.Errorf("the Jobs and Services Airflow builds do not pass the API server's validation:\n%s", out)
	}
}

// multiNodeFlow has multi-node steps of every kind: Trainium (with its root
// communicator) after a single-node step, with params, retries, a timeout, shared
// memory and a volume; a foreach over GPU nodes in a namespace of its own, on
// another port; and a single-node step after both.
func multiNodeFlow() *sdk.Flow {
	return sdk.NewFlow("nodes", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule")).
		Step("prepare", sdk.Command("true"), sdk.CPU("4")).
		Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py", "--epochs", "$(MANIFOLD_PARAM_EPOCHS)"),
			sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.SharedMemory("64Gi"),
			sdk.Volume("ckpt", "/checkpoints"), sdk.Env("NOTE", "{{ not a template }}"), sdk.Label("team", "ml"),
			sdk.Annotation("example.com/owner", "ml@example.com"), sdk.Retry(2), sdk.Timeout(time.Hour)).
		Step("sweep", sdk.After("prepare"), sdk.Command("torchrun", "sweep.py"), sdk.Nodes(3), sdk.Port(1234),
			sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll(), sdk.Foreach("a", "{{ b }}"), sdk.Namespace("ml"),
			sdk.Retry(1), sdk.RetryBackoff(time.Minute)).
		Step("evaluate", sdk.After("train", "sweep"), sdk.Command("true"))
}

// longestMultiNode has the longest names, the most nodes, and foreach items whose
// indexes take two digits: every name must still fit.
func longestMultiNode() *sdk.Flow {
	long := strings.Repeat("m", compile.MaxNameLength)
	items := make([]string, 11)
	for i := range items {
		items[i] = strconv.Itoa(i)
	}
	return sdk.NewFlow(long, sdk.Image("busybox")).
		Step(strings.Repeat("a", compile.MaxNameLength), sdk.Command("true"), sdk.Nodes(compile.MaxNodes)).
		Step(strings.Repeat("b", compile.MaxNameLength), sdk.Command("true"), sdk.Nodes(compile.MaxNodes), sdk.Foreach(items...))
}
