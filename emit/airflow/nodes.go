package airflow

import (
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/plan"
)

// A multi-node step is three tasks:
//
//   - <step>_service (a setup task, KubernetesCreateResourceOperator) creates the
//     headless Service that gives the step's pods their DNS names, one per
//     foreach item;
//   - <step> (KubernetesJobOperator) runs the step's pod as an Indexed Job of one
//     pod per node, waits for the Job to finish, and fails when it fails;
//   - <step>_service_delete (its teardown, KubernetesDeleteResourceOperator)
//     deletes the Service once the Job task is done, however it ended.
//
// Names are per run: two runs of the DAG at once must not share a Service, and
// the operator adds no random suffix to the name it is given (and one would keep
// the pods from knowing rank 0's name). The Service is named
// <flow>-<step>[-<item>]-<run>, <run> being a digest of the run's id that every
// task of the run renders alike. Airflow's retries re-run the whole Job, as a
// distributed job must (a node that restarts alone cannot rejoin the others'
// collectives), so the Job is named job-<service>-<try>: each try a new Job under
// the one Service, which selects the pods of every try by LabelService. Rank 0 of
// a try is <job>-0.<service>.

// Suffixes of the task ids of a multi-node step's Service tasks. Step names
// cannot hold '_', so these ids never meet a step's.
const (
	ServiceTaskSuffix       = "_service"
	ServiceDeleteTaskSuffix = "_service_delete"
)

// LabelService is the label by which a multi-node step's Service selects the pods
// of its Job, whatever the try; its value is the Service's name.
const LabelService = "manifold.dev/service"

// RunToken is the template of a digest of the DAG run's id: 12 hex digits, the
// same in every task of a run. It holds no spaces, so no YAML writer breaks it
// across lines.
const RunToken = "{{macros.uuid.uuid5(macros.uuid.NAMESPACE_URL,run_id).hex[:12]}}"

// JobNamePrefix is what KubernetesJobOperator puts before the name it is given.
const JobNamePrefix = "job-"

// Templates of the task instance's try and map index.
const (
	tryNumber = "{{ti.try_number}}"
	mapIndex  = "{{ti.map_index}}"
)

// Lengths the names leave room for: the run digest, and tries up to 999.
const (
	runTokenLength = 12
	tryDigits      = 3
)

// connectionNamespace is the namespace of a multi-node step without one: the
// Kubernetes connection's, else "default", which is where the resource operator
// creates the Service. The Job operator alone would fall back to the worker's
// own namespace first, and the nodes would not find the Service.
const connectionNamespace = Template(`{{task.hook.get_namespace() or "default"}}`)

// DiscoverPodsRetries is how many times the Job operator lists the Job's pods,
// back to back, before it gives up on finding them. The Job controller creates
// them a moment after the Job; the operator's default of 3 can give up first,
// failing the task while the Job runs on unwatched.
const DiscoverPodsRetries = 100

// nodeNames are the names of a multi-node step's objects on Airflow.
type nodeNames struct {
	stem    string
	foreach bool
}

func newNodeNames(f *plan.Flow, s *plan.Step) nodeNames {
	max := emit.MaxNameLength - len(JobNamePrefix) - len("-") - runTokenLength - len("-") - tryDigits -
		len("-"+strconv.Itoa(s.Nodes-1))
	if s.Foreach != nil {
		max -= len("-" + strconv.Itoa(len(s.Foreach)-1))
	}
	return nodeNames{stem: emit.Name(max, f.Name, s.Name), foreach: s.Foreach != nil}
}

// item is the name of a step's foreach item index (a number or the map index
// template); the stem for a step without foreach.
func (n nodeNames) item(index string) string {
	if !n.foreach {
		return n.stem
	}
	return n.stem + "-" + index
}

// service is the Service's name; the pods' subdomain.
func (n nodeNames) service(index string) string { return n.item(index) + "-" + RunToken }

// job is the name the Job operator is given; it creates the Job as
// JobNamePrefix+job.
func (n nodeNames) job(index string) string { return n.service(index) + "-" + tryNumber }

// masterAddr is rank 0's DNS name.
func (n nodeNames) masterAddr(index string) string {
	return job.RankZero(JobNamePrefix+n.job(index), n.service(index))
}

// multiNode returns the tasks of multi-node step s.
func multiNode(f *plan.Flow, s *plan.Step) ([]Task, error) {
	names := newNodeNames(f, s)
	index := ""
	if s.Foreach != nil {
		index = mapIndex
	}
	run, err := task(f, s, JobOperator, emit.PodOptions{Param: ParamRef, RunID: RunID, TraceParent: TraceParent, MasterAddr: names.masterAddr("")},
		func(i int) emit.PodOptions {
			return emit.PodOptions{Param: ParamRef, RunID: RunID, TraceParent: TraceParent, Item: emit.ItemAt(s, i), MasterAddr: names.masterAddr(strconv.Itoa(i))}
		})
	if err != nil {
		return nil, err
	}
	for _, name := range []string{plan.EnvMasterAddr, plan.EnvPETMasterAddr, plan.EnvNeuronRootComm} {
		run.Templates[name] = true
	}
	run.Args = indexedJobArgs(s, names, index, run.Args)
	create, remove, err := serviceTasks(f, s, names)
	if err != nil {
		return nil, err
	}
	run.Upstream = []string{create.ID}
	return []Task{create, run, remove}, nil
}

// indexedJobArgs turns the Job operator's arguments args of multi-node step s
// into those of an Indexed Job of its nodes, for the item index (a template,
// or "" without foreach): the Job's name, its pods' labels with the one the
// Service selects by, their subdomain, and the Job's completions.
func indexedJobArgs(s *plan.Step, names nodeNames, index string, args []Arg) []Arg {
	// The pod's labels, with the one the Service selects by; the pods' subdomain
	// through the operator's one templated way to set it, pod_template_dict.
	labels := map[string]any{LabelService: Template(names.service(index))}
	var podLabels map[string]string
	args = slices.DeleteFunc(args, func(a Arg) bool {
		if a.Name == "labels" {
			podLabels = a.Value.(map[string]string)
			return true
		}
		return false
	})
	for k, v := range podLabels {
		labels[k] = v
	}
	subdomain := map[string]any{"spec": map[string]any{
		"subdomain":  Template(names.service(index)),
		"containers": []any{map[string]any{"name": plan.ContainerName}},
	}}
	n := s.Nodes
	jobArgs := []Arg{
		{"labels", labels},
		{"pod_template_dict", subdomain},
		{"completion_mode", "Indexed"},
		{"completions", n},
		{"parallelism", n},
		// A node that fails fails the Job at once; Airflow's retries run it again.
		{"backoff_limit", 0},
		{"wait_until_job_complete", true},
		{"discover_pods_retry_number", DiscoverPodsRetries},
	}
	if sus := emit.Suspend(s); sus != nil {
		// Created suspended, for Kueue to admit (see emit.Suspend).
		jobArgs = append(jobArgs, Arg{"suspend", *sus})
	}
	var out []Arg
	for _, a := range args {
		switch a.Name {
		case "name":
			out = append(out, Arg{"name", Template(names.job(index))}, Arg{"random_name_suffix", false})
			if s.Namespace == "" {
				out = append(out, Arg{"namespace", connectionNamespace})
			}
			continue
		case "retries":
			out = append(out, jobArgs...)
		}
		out = append(out, a)
	}
	return out
}

// serviceTasks returns the tasks that create the headless Services of
// multi-node step s, one per item, before it runs, and delete them after.
func serviceTasks(f *plan.Flow, s *plan.Step, names nodeNames) (create, remove Task, err error) {
	// The Services, one per item, in the YAML the resource operators read.
	var services []any
	for i := range max(1, len(s.Foreach)) {
		var item *emit.Item
		idx := ""
		if s.Foreach != nil {
			item, idx = emit.ItemAt(s, i), strconv.Itoa(i)
		}
		name := names.service(idx)
		pod := emit.Pod(f, s, emit.PodOptions{Param: ParamRef, Item: item})
		services = append(services, job.HeadlessService(
			metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: emit.ObjectLabels(pod.Labels, item)},
			map[string]string{LabelService: name}, pod.Spec.Containers[0].Ports))
	}
	yaml, err := encode.YAML("", services...)
	if err != nil {
		return Task{}, Task{}, fmt.Errorf("the Service of a multi-node step: %w", err)
	}
	resource := func(id, operator string) Task {
		t := Task{ID: id, Operator: operator, Args: []Arg{{"task_id", id}, {"yaml_conf", Template(yaml)}}}
		if s.Namespace != "" {
			t.Args = append(t.Args, Arg{"namespace", s.Namespace})
		}
		return t
	}
	create = resource(s.Name+ServiceTaskSuffix, CreateResourceOperator)
	create.Upstream, create.Setup = s.After, true
	remove = resource(s.Name+ServiceDeleteTaskSuffix, DeleteResourceOperator)
	remove.Upstream, remove.Setups = []string{s.Name}, []string{create.ID}
	return create, remove, nil
}
