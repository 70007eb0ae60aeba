package emit_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	jobsetv1 "sigs.k8s.io/jobset/api/jobset/v1alpha2"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/emit/job"
	"github.com/manifoldflow/manifold/emit/jobset"
	"github.com/manifoldflow/manifold/emit/targets"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// runPod is one pod template a target runs for a step: the step, the foreach index
// (-1 for none) and the template.
type runPod struct {
	step  string
	index int
	pod   corev1.PodTemplateSpec
}

// mechanism lists, per target, the pod fields its multi-node mechanism adds to the
// step's pod, with the reason. Nothing else may differ.
var mechanism = map[string]func(*corev1.PodTemplateSpec){
	// The Job target's Indexed Job puts its pods under the headless Service of the
	// same name, which is what makes <job>-0.<job> resolve.
	"job": func(p *corev1.PodTemplateSpec) { p.Spec.Subdomain = "" },
	// JobSet sets the subdomain itself when it creates the Jobs.
	"jobset": func(*corev1.PodTemplateSpec) {},
	// The argo target creates the jobset target's JobSet, or (argo_multi_node =
	// "job") the job target's Indexed Job and Service, so its mechanisms are theirs.
	"argo":     func(*corev1.PodTemplateSpec) {},
	"argo-job": func(p *corev1.PodTemplateSpec) { p.Spec.Subdomain = "" },
}

// runUID stands for the uid Argo gives a workflow run.
const runUID = "0f3c9a7e-5b1d-4e2a-9c8f-7a6b5c4d3e2f"

// argoPods returns the pods the argo target runs in mode (argo_multi_node): each
// container step's pod as Argo's controller builds it, and each pod in the objects
// a multi-node step's resource templates create, after Argo's substitution.
func argoPods(t *testing.T, p *plan.Flow, mode string) []runPod {
	t.Helper()
	q := *p
	q.ArgoMultiNode = mode
	wt, errs := argo.WorkflowTemplate(&q)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var out []runPod
	for i := range q.Steps {
		s := &q.Steps[i]
		items := max(1, len(s.Foreach))
		if s.Nodes > 1 && mode == plan.ArgoJobSet {
			items = 1 // one JobSet, a replicated job per item
		}
		for item := range items {
			var pods []corev1.PodTemplateSpec
			if s.Nodes > 1 {
				m, err := argopod.Manifest(wt, argo.TaskName(s.Name), item, runUID)
				if err != nil {
					t.Fatal(err)
				}
				if pods, err = argopod.ManifestPods(m); err != nil {
					t.Fatalf("%s: %v\n%s", s.Name, err, m)
				}
			} else {
				pod, err := argopod.Resolve(wt, argo.TaskName(s.Name), item)
				if err != nil {
					t.Fatal(err)
				}
				pods = []corev1.PodTemplateSpec{pod}
			}
			for k, pod := range pods {
				index := -1
				if s.Foreach != nil {
					index = item + k
				}
				out = append(out, runPod{s.Name, index, pod})
			}
		}
	}
	return out
}

var podsOf = map[string]func(t *testing.T, p *plan.Flow) []runPod{
	"argo":     func(t *testing.T, p *plan.Flow) []runPod { return argoPods(t, p, plan.ArgoJobSet) },
	"argo-job": func(t *testing.T, p *plan.Flow) []runPod { return argoPods(t, p, plan.ArgoJob) },
	"job": func(t *testing.T, p *plan.Flow) []runPod {
		objs, errs := job.Objects(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		var out []runPod
		for _, o := range objs {
			if j, ok := o.(*batchv1.Job); ok {
				out = append(out, runPod{j.Spec.Template.Labels[plan.LabelStep], index(j.Labels), j.Spec.Template})
			}
		}
		return out
	},
	"jobset": func(t *testing.T, p *plan.Flow) []runPod {
		objs, errs := jobset.Objects(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		var out []runPod
		for _, o := range objs {
			js, ok := o.(*jobsetv1.JobSet)
			if !ok {
				continue // a step's ResourceClaimTemplate
			}
			for _, rj := range js.Spec.ReplicatedJobs {
				out = append(out, runPod{rj.Template.Spec.Template.Labels[plan.LabelStep], index(rj.Template.Labels), rj.Template.Spec.Template})
			}
		}
		return out
	},
}

// checkStore checks that pod (a target's) and want (the single-node pod the
// builder makes by default) have the flow's artifact store: its variables, the
// run ID as the target renders it (runID) and the default one, and a volume
// store's volume and mount. It then blanks the run IDs, which alone may differ.
func checkStore(t *testing.T, what string, p *plan.Flow, runID string, want, pod *corev1.PodTemplateSpec) {
	t.Helper()
	for _, side := range []struct {
		pod   *corev1.PodTemplateSpec
		runID string
	}{{want, plan.DefaultRunID}, {pod, runID}} {
		env := map[string]string{}
		c := &side.pod.Spec.Containers[0]
		for i := range c.Env {
			env[c.Env[i].Name] = c.Env[i].Value
			if c.Env[i].Name == plan.EnvRunID {
				c.Env[i].Value = ""
			}
		}
		a := p.Artifacts
		if a == nil {
			for _, name := range []string{plan.EnvArtifactStore, plan.EnvRunID, plan.EnvRunDir, plan.EnvArtifacts} {
				if _, ok := env[name]; ok {
					t.Errorf("%s: %s in a flow without an artifact store", what, name)
				}
			}
			continue
		}
		if env[plan.EnvArtifactStore] != a.URL || env[plan.EnvRunID] != side.runID || env[plan.EnvS3Endpoint] != a.Endpoint ||
			env[plan.EnvRunDir] != "$(MANIFOLD_ARTIFACT_STORE)/"+p.Name+"/$(MANIFOLD_RUN_ID)" || !strings.HasPrefix(env[plan.EnvArtifacts], "$(MANIFOLD_RUN_DIR)/") {
			t.Errorf("%s: store variables %v, want store %s, endpoint %q and run ID %q", what, env, a.URL, a.Endpoint, side.runID)
		}
		mounted := slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == plan.ArtifactVolumeName && m.MountPath == plan.ArtifactVolumePath
		})
		claimed := slices.ContainsFunc(side.pod.Spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == plan.ArtifactVolumeName && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == a.Claim
		})
		if a.Claim != "" && (!mounted || !claimed) || a.Claim == "" && (mounted || claimed) {
			t.Errorf("%s: artifact volume mounted %v, claimed %v; want both only for a volume store (claim %q)", what, mounted, claimed, a.Claim)
		}
	}
}

func index(labels map[string]string) int {
	i := -1
	if v, ok := labels[plan.LabelIndex]; ok {
		fmt.Sscan(v, &i)
	}
	return i
}

// rendezvousNames are the variables a multi-node step's pods get, in order.
var rendezvousNames = []string{"MANIFOLD_NODE_RANK", "MANIFOLD_NUM_NODES", "MASTER_ADDR", "MASTER_PORT",
	"PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}

// runIDOf is, per target, the run ID its pods get (MANIFOLD_RUN_ID, with an
// artifact store): the one value of the store that may differ between targets.
var runIDOf = map[string]string{
	"job":      plan.DefaultRunID,
	"jobset":   plan.DefaultRunID,
	"argo":     "{{workflow.name}}",
	"argo-job": "{{workflow.name}}",
}

// stores are the artifact stores the parity tests run with: none, S3 on an
// S3-compatible server, and a shared volume.
var stores = map[string]compile.Options{
	"no-store": {},
	"s3":       {Artifacts: "s3://ml-artifacts/flows", ArtifactsEndpoint: "http://minio.storage:9000"},
	"volume":   {Artifacts: "pvc://shared-artifacts"},
}

// TestMultiNodeParity: every node of a multi-node step, on every target, runs the
// step's single-node pod plus exactly the rendezvous variables and the fields its
// target's mechanism requires; with an artifact store, every pod of every step
// has the store's variables and volume, its run ID as its target renders it.
func TestMultiNodeParity(t *testing.T) {
	f := sdk.NewFlow("parity", sdk.Image("example.com/flow:v1"), sdk.Param("epochs", "3"),
		sdk.Toleration("dedicated", "ml", "NoSchedule")).
		Step("prepare", sdk.Command("true"), sdk.CPU("4")).
		Step("train", sdk.After("prepare"), sdk.Command("torchrun", "train.py"), sdk.Nodes(2),
			sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8), sdk.SharedMemory("64Gi"),
			sdk.Env("A", "1"), sdk.Retry(2), sdk.Timeout(time.Hour)).
		Step("gpu", sdk.After("prepare"), sdk.Command("torchrun", "gpu.py"), sdk.Nodes(3), sdk.Port(1234),
			sdk.InstanceType("p5.48xlarge"), sdk.GPU(8), sdk.EFAAll(), sdk.Foreach("a", "b")).
		Step("dra", sdk.After("prepare"), sdk.Command("torchrun", "dra.py"), sdk.Nodes(2),
			sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(16), sdk.EFAAll(), sdk.DRA(), sdk.Claim("shared-fpga"))
	for store, o := range stores {
		t.Run(store, func(t *testing.T) {
			p, errs := compile.Compile(f, o)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			multiNodeParity(t, p)
		})
	}
	// Queued by Kueue: the pods are the builder's but for a bare pod's queue
	// labels (multiNodeParity checks it).
	t.Run("queued", func(t *testing.T) {
		p, errs := compile.Compile(f, compile.Options{Config: compile.Config{Queue: "ml"}})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		p.Steps[0].Priority = "high"
		p.Steps[0].Topology = "example.com/block"
		multiNodeParity(t, p)
	})
}

// bare reports whether target runs step s's pod itself rather than through a
// Job: Argo's container templates do, for a single-node step.
func bare(target string, s *plan.Step) bool {
	return strings.HasPrefix(target, "argo") && s.Nodes <= 1
}

// checkQueueLabels checks that pod carries step s's Kueue labels when its
// target creates it bare (Kueue then admits the pod by them) and none when a
// Job or JobSet runs it (Kueue admits that whole, by its own labels), then
// removes them: they are the one way a pod differs for queueing.
func checkQueueLabels(t *testing.T, what, target string, s *plan.Step, pod *corev1.PodTemplateSpec) {
	t.Helper()
	var want map[string]string
	if bare(target, s) {
		want = emit.QueueLabels(s)
	}
	got := map[string]string{}
	for _, k := range []string{plan.LabelQueueName, plan.LabelPriorityClass} {
		if v, ok := pod.Labels[k]; ok {
			got[k] = v
			delete(pod.Labels, k)
		}
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: Kueue's labels on the pod (-want +got):\n%s", what, diff)
	}
}

func multiNodeParity(t *testing.T, p *plan.Flow) {
	for target, pods := range podsOf {
		t.Run(target, func(t *testing.T) {
			got := pods(t, p)
			if len(got) != 1+1+2+1 {
				t.Fatalf("%d pod templates, want 5", len(got))
			}
			for _, rp := range got {
				s := p.Step(rp.step)
				var item *emit.Item
				if rp.index >= 0 {
					item = emit.ItemAt(s, rp.index)
				}
				single := *s
				single.Nodes = 1
				want := emit.Pod(p, &single, emit.PodOptions{Item: item})

				pod := *rp.pod.DeepCopy()
				mechanism[target](&pod)
				if cm := argo.Literals(p); cm != nil && strings.HasPrefix(target, "argo") {
					// The steps of a flow with params read MANIFOLD_BRACES:
					// both containers as the kubelet fills them in.
					var err error
					if want.Spec.Containers[0], err = argopod.Expanded(want.Spec.Containers[0]); err != nil {
						t.Fatal(err)
					}
					if pod.Spec.Containers[0], err = argopod.Expanded(pod.Spec.Containers[0], cm); err != nil {
						t.Fatal(err)
					}
				}
				c := &pod.Spec.Containers[0]
				checkStore(t, fmt.Sprintf("%s[%d]", rp.step, rp.index), p, runIDOf[target], &want, &pod)
				checkPlacement(t, fmt.Sprintf("%s[%d]", rp.step, rp.index), p, s, pod.Spec.Affinity)
				checkQueueLabels(t, fmt.Sprintf("%s[%d]", rp.step, rp.index), target, s, &pod)
				pod.Spec.Affinity = nil
				var names []string
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool {
					if slices.Contains(rendezvousNames, e.Name) || e.Name == "NEURON_RT_ROOT_COMM_ID" {
						names = append(names, e.Name)
						return true
					}
					return false
				})
				if diff := cmp.Diff(want, pod, argopod.Untraced); diff != "" {
					t.Errorf("%s[%d]: pod beyond rendezvous and mechanism (-single-node +%s):\n%s", rp.step, rp.index, target, diff)
				}
				wantNames := []string(nil)
				if s.Nodes > 1 {
					wantNames = slices.Clone(rendezvousNames)
					if s.Neuron > 0 {
						wantNames = append(wantNames, "NEURON_RT_ROOT_COMM_ID")
					}
				}
				if diff := cmp.Diff(wantNames, names); diff != "" {
					t.Errorf("%s[%d]: rendezvous variables (-want +got):\n%s", rp.step, rp.index, diff)
				}
			}
		})
	}
}

// checkPlacement checks the placement terms of a pod of step s: none for one
// pod; for several, one pod per node and, with EFA, one zone, each among the
// step's pods of the same Job.
func checkPlacement(t *testing.T, name string, p *plan.Flow, s *plan.Step, got *corev1.Affinity) {
	t.Helper()
	var want *corev1.Affinity
	if s.Nodes > 1 {
		term := func(key string) []corev1.PodAffinityTerm {
			return []corev1.PodAffinityTerm{{
				LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{"manifold.dev/flow": p.Name, "manifold.dev/step": s.Name}},
				MatchLabelKeys: []string{"batch.kubernetes.io/controller-uid"},
				TopologyKey:    key,
			}}
		}
		want = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term("kubernetes.io/hostname")}}
		if s.EFA > 0 {
			want.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term("topology.kubernetes.io/zone")}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: placement (-want +got):\n%s", name, diff)
	}
}

// TestDRAClaimsParity: on every target, every pod of a DRA step claims from the
// step's generated template and the installed one, its container uses both
// claims, and it asks no device-plugin resource for the claimed devices; the job
// and jobset targets emit the template the pods name.
func TestDRAClaimsParity(t *testing.T) {
	f := sdk.NewFlow("dra", sdk.Image("example.com/flow:v1")).
		Step("one", sdk.Command("true"), sdk.InstanceType("trn2.48xlarge"), sdk.Trainium(4), sdk.EFA(4),
			sdk.DRA(), sdk.Claim("shared-fpga"), sdk.Foreach("a", "b")).
		Step("many", sdk.Command("true"), sdk.Nodes(2), sdk.GPU(1), sdk.EFA(1), sdk.DRA())
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	wantClaims := map[string][]string{
		"one":  {"dra-one", "shared-fpga"},
		"many": {"dra-many"},
	}
	for target, pods := range podsOf {
		t.Run(target, func(t *testing.T) {
			got := pods(t, p)
			if len(got) == 0 {
				t.Fatal("no pods")
			}
			for _, rp := range got {
				var templates, podNames, containerNames []string
				for _, c := range rp.pod.Spec.ResourceClaims {
					podNames = append(podNames, c.Name)
					if c.ResourceClaimTemplateName != nil {
						templates = append(templates, *c.ResourceClaimTemplateName)
					}
				}
				res := rp.pod.Spec.Containers[0].Resources
				for _, c := range res.Claims {
					containerNames = append(containerNames, c.Name)
				}
				if diff := cmp.Diff(wantClaims[rp.step], templates); diff != "" {
					t.Errorf("%s[%d]: claimed templates (-want +got):\n%s", rp.step, rp.index, diff)
				}
				if diff := cmp.Diff(podNames, containerNames); diff != "" || len(podNames) != len(wantClaims[rp.step]) {
					t.Errorf("%s[%d]: the container uses claims %v of the pod's %v", rp.step, rp.index, containerNames, podNames)
				}
				for _, name := range []corev1.ResourceName{"aws.amazon.com/neuron", "vpc.amazonaws.com/efa", "nvidia.com/gpu"} {
					if _, ok := res.Limits[name]; ok {
						t.Errorf("%s[%d]: limits %s beside its claim", rp.step, rp.index, name)
					}
				}
				if len(rp.pod.Spec.Tolerations) > 0 {
					t.Errorf("%s[%d]: tolerations %v for claimed devices", rp.step, rp.index, rp.pod.Spec.Tolerations)
				}
			}
		})
	}
	for target, objects := range map[string]func(*plan.Flow) ([]any, field.ErrorList){"job": job.Objects, "jobset": jobset.Objects} {
		objs, errs := objects(p)
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		var names []string
		for _, o := range objs {
			if rct, ok := o.(*resourcev1.ResourceClaimTemplate); ok {
				names = append(names, rct.Name)
			}
		}
		if diff := cmp.Diff([]string{"dra-one", "dra-many"}, names); diff != "" {
			t.Errorf("%s: ResourceClaimTemplates (-want +got):\n%s", target, diff)
		}
	}
}

// TestOutputsNameEveryFile: every file a target emits, with and without DRA
// claims, is among the names its Outputs gives, which compile -o relies on to
// remove what an earlier compile wrote.
func TestOutputsNameEveryFile(t *testing.T) {
	all := targets.All()
	for _, f := range []*sdk.Flow{testflows.EveryOption(), sdk.NewFlow("dra", sdk.Image("example.com/flow:v1")).
		Step("train", sdk.Command("true"), sdk.Trainium(4), sdk.EFA(4), sdk.DRA())} {
		p, errs := compile.Compile(f, compile.Options{})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, target := range all {
			files, errs := emit.Files(target, p)
			if len(errs) > 0 {
				t.Fatalf("%s: %v", target.Name(), errs)
			}
			outputs := target.Outputs(p.Name)
			for _, file := range files {
				if !slices.Contains(outputs, file.Name) {
					t.Errorf("%s emits %s for flow %s, which its Outputs %v does not name", target.Name(), file.Name, p.Name, outputs)
				}
			}
		}
	}
}

// TestQueuedObjects: with a queue, every Job and JobSet a target makes for a
// step (the job and jobset targets', and those Argo's resource templates
// create) carries the step's Kueue labels and is created suspended, for Kueue
// to admit whole; without one, none does.
func TestQueuedObjects(t *testing.T) {
	f := sdk.NewFlow("queued", sdk.Image("example.com/flow:v1")).
		Step("one", sdk.Command("true")).
		Step("many", sdk.Command("true"), sdk.Nodes(2), sdk.Foreach("a", "b"))
	for _, queue := range []string{"", "ml"} {
		p, errs := compile.Compile(f, compile.Options{Config: compile.Config{Queue: queue}})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		for i := range p.Steps {
			p.Steps[i].Priority = "high"
		}
		type admitted struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct{ Suspend *bool }
		}
		var got []admitted
		for _, objects := range []func(*plan.Flow) ([]any, field.ErrorList){job.Objects, jobset.Objects} {
			objs, errs := objects(p)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			for _, o := range objs {
				switch o := o.(type) {
				case *batchv1.Job:
					got = append(got, admitted{struct{ Labels map[string]string }{o.Labels}, struct{ Suspend *bool }{o.Spec.Suspend}})
				case *jobsetv1.JobSet:
					got = append(got, admitted{struct{ Labels map[string]string }{o.Labels}, struct{ Suspend *bool }{o.Spec.Suspend}})
				}
			}
		}
		for _, mode := range []string{plan.ArgoJobSet, plan.ArgoJob} {
			q := *p
			q.ArgoMultiNode = mode
			wt, errs := argo.WorkflowTemplate(&q)
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			m, err := argopod.Manifest(wt, argo.TaskName("many"), 0, runUID)
			if err != nil {
				t.Fatal(err)
			}
			var a admitted
			if err := yaml.Unmarshal([]byte(m), &a); err != nil {
				t.Fatal(err)
			}
			got = append(got, a)
		}
		if len(got) != (1+2)+(1+1)+2 { // the job target's, the jobset target's, Argo's
			t.Fatalf("queue %q: %d Jobs and JobSets, want 7", queue, len(got))
		}
		for _, a := range got {
			want := map[string]string(nil)
			if queue != "" {
				want = map[string]string{plan.LabelQueueName: queue, plan.LabelPriorityClass: "high"}
			}
			kueue := map[string]string{}
			for k, v := range a.Metadata.Labels {
				if strings.HasPrefix(k, "kueue.x-k8s.io/") {
					kueue[k] = v
				}
			}
			if diff := cmp.Diff(want, kueue, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("queue %q: Kueue's labels (-want +got):\n%s", queue, diff)
			}
			if suspended := a.Spec.Suspend != nil && *a.Spec.Suspend; suspended != (queue != "") {
				t.Errorf("queue %q: suspend %v", queue, a.Spec.Suspend)
			}
		}
	}
}
