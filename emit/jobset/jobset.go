// Package jobset emits a flow as JobSets (sigs.k8s.io/jobset): one JobSet per step,
// in dependency order, each recording the steps it waits for in the
// manifold.dev/after annotation. A step is one replicated job (one per item of a
// foreach step) whose Indexed Job runs one pod per node; JobSet gives every pod a DNS
// host name, so a multi-node step's MASTER_ADDR resolves to rank 0. Single-node steps
// are JobSets too, so a cluster that runs JobSets runs the whole flow one way.
package jobset

import (
	"fmt"
	"iter"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// APIVersion is the JobSet API this target emits.
const APIVersion = "jobset.x-k8s.io/v1alpha2"

// ReplicatedJob is the name of a step's replicated job; a foreach step's are
// ItemReplicatedJob(index).
const ReplicatedJob = "node"

// ItemReplicatedJob names the replicated job of foreach item index.
func ItemReplicatedJob(index int) string { return "item" + strconv.Itoa(index) }

// podNameSuffix is the random suffix Kubernetes adds to a pod's name.
const podNameSuffix = len("-abcde")

// Target is the jobset target.
type Target struct{}

var _ emit.Target = Target{}

// Name returns "jobset".
func (Target) Name() string { return "jobset" }

// Outputs names the files Emit may write for flow: see emit.Target.
func (Target) Outputs(flow string) []string { return []string{flow + ".jobset.yaml"} }

// Emit writes <flow>.jobset.yaml, making each object as it writes it.
func (Target) Emit(f *plan.Flow, create emit.Create) field.ErrorList {
	if errs := scheduled(f); len(errs) > 0 {
		return errs
	}
	return emit.YAMLStream(create, f.Name+".jobset.yaml", emit.OrderedHeader("JobSets", f.Name, "jobset", string(jobsetv1.JobSetCompleted)), objects(f))
}

// Objects returns the flow's JobSets in dependency order, each preceded by the
// ResourceClaimTemplate of its step's DRA devices.
func Objects(f *plan.Flow) ([]any, field.ErrorList) {
	if errs := scheduled(f); len(errs) > 0 {
		return nil, errs
	}
	return slices.Collect(objects(f)), nil
}

// scheduled refuses a scheduled flow: JobSets have no scheduled form.
func scheduled(f *plan.Flow) field.ErrorList {
	if errs := emit.Static(f, "jobset", "writes static manifests that Kubernetes applies as they are"); len(errs) > 0 {
		return errs
	}
	if f.Schedule == "" {
		return nil
	}
	return field.ErrorList{field.Forbidden(field.NewPath("schedule"),
		"JobSets have no scheduled form; compile the flow with --target argo (a CronWorkflow) or --target airflow (a scheduled DAG), a one-step flow with --target job (a CronJob), or leave out sdk.Schedule")}
}

// objects yields what Objects returns, one object at a time.
func objects(f *plan.Flow) iter.Seq[any] {
	return func(yield func(any) bool) {
		for i := range f.Steps {
			if t := emit.ClaimTemplate(f, &f.Steps[i]); t != nil && !yield(t) {
				return
			}
			if !yield(JobSet(f, &f.Steps[i])) {
				return
			}
		}
	}
}

// Name is the name of step s's JobSet: the flow's and step's names within MaxName.
func Name(f *plan.Flow, s *plan.Step) string {
	return emit.RunName(f, MaxName(s), f.Name, s.Name)
}

// MaxName is the longest name step s's JobSet may have. It leaves room for what
// JobSet adds to make the names of its Jobs and pods (replicated job, job index,
// node rank, random suffix), which must be DNS labels too.
func MaxName(s *plan.Step) int {
	longest := ReplicatedJob
	if n := len(s.Foreach); n > 0 {
		longest = ItemReplicatedJob(n - 1)
	}
	pod := len("-"+longest+"-0-"+strconv.Itoa(s.Nodes-1)) + podNameSuffix
	return emit.MaxNameLength - pod
}

// MasterAddr is the DNS name of rank 0 of replicated job rjob of JobSet js: its
// first Job's first pod, under the JobSet's own headless Service.
func MasterAddr(js, rjob string) string {
	return fmt.Sprintf("%s-%s-0-0.%s", js, rjob, js)
}

// JobSet returns step s's JobSet.
func JobSet(f *plan.Flow, s *plan.Step) *jobsetv1.JobSet {
	return Build(f, s, Name(f, s), emit.PodOptions{})
}

// Build returns step s's JobSet named name (at most MaxName(s) characters), its
// pods built with o: o.Param renders the params, while each replicated job sets
// its own foreach item and, for a multi-node step, its rank 0's address. Targets
// that create the JobSet themselves (Argo) pass their own name and params.
func Build(f *plan.Flow, s *plan.Step, name string, o emit.PodOptions) *jobsetv1.JobSet {
	js := &jobsetv1.JobSet{
		TypeMeta: metav1.TypeMeta{APIVersion: APIVersion, Kind: "JobSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   s.Namespace,
			Annotations: emit.AfterAnnotations(s),
		},
		Spec: jobsetv1.JobSetSpec{
			Network: &jobsetv1.Network{EnableDNSHostnames: new(true), PublishNotReadyAddresses: new(true)},
		},
	}
	if s.Retry > 0 {
		js.Spec.FailurePolicy = &jobsetv1.FailurePolicy{MaxRestarts: int32(s.Retry)}
	}
	if s.Foreach == nil {
		js.Spec.ReplicatedJobs = []jobsetv1.ReplicatedJob{replicatedJob(f, s, name, ReplicatedJob, nil, o)}
	} else {
		for i := range s.Foreach {
			js.Spec.ReplicatedJobs = append(js.Spec.ReplicatedJobs, replicatedJob(f, s, name, ItemReplicatedJob(i), emit.ItemAt(s, i), o))
		}
	}
	// The step's pod labels, and the queue's: Kueue admits the JobSet whole, one
	// workload whose podsets are its replicated jobs.
	js.Labels = emit.Queued(js.Spec.ReplicatedJobs[0].Template.Spec.Template.Labels, s)
	js.Spec.Suspend = emit.Suspend(s)
	return js
}

// replicatedJob runs one copy of the step: an Indexed Job of one pod per node. A
// failed pod fails its Job at once (backoffLimit 0) and JobSet restarts all of the
// step's Jobs together, up to Retry times, so the nodes rendezvous afresh.
func replicatedJob(f *plan.Flow, s *plan.Step, js, rjob string, item *emit.Item, o emit.PodOptions) jobsetv1.ReplicatedJob {
	o.Item, o.MasterAddr = item, ""
	if s.Nodes > 1 {
		o.MasterAddr = MasterAddr(js, rjob)
	}
	pod := emit.Pod(f, s, o)
	n := int32(s.Nodes)
	spec := batchv1.JobSpec{
		CompletionMode: new(batchv1.IndexedCompletion),
		Completions:    &n,
		Parallelism:    new(n),
		BackoffLimit:   new(int32(0)),
		Template:       pod,
	}
	if s.Timeout > 0 {
		spec.ActiveDeadlineSeconds = new(emit.Seconds(s.Timeout))
	}
	return jobsetv1.ReplicatedJob{
		Name:     rjob,
		Replicas: 1,
		Template: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: emit.ObjectLabels(pod.Labels, item)}, Spec: spec},
	}
}
