// Package emit builds the one pod every target runs for a step, and holds what the
// target packages (emit/job and the others) share: object names, labels and
// annotations, the ResourceClaimTemplates of DRA steps, and the Target interface
// with the helpers that write a target's files. The YAML and JSON the targets
// write come from emit/encode.
package emit

import (
	"math"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/plan"
)

// SharedMemoryVolume is the name of the memory-backed volume mounted at /dev/shm.
const SharedMemoryVolume = "dshm"

// PodOptions says how a target renders the values that differ between targets.
type PodOptions struct {
	// Param renders a flow param's value; nil uses the compiled value (p.Value).
	// Argo passes "{{workflow.parameters.NAME}}", Airflow "{{ params['NAME'] }}".
	Param func(p plan.Param) string
	// Item, when set, gives a foreach step's MANIFOLD_ITEM and MANIFOLD_INDEX.
	Item *Item
	// MasterAddr is the DNS name of rank 0 of a multi-node step, as the target's
	// mechanism (Indexed Job and Service, JobSet) makes it resolve; the pod's
	// rendezvous variables point there. Targets set it for every step with Nodes > 1.
	MasterAddr string
	// RunID renders the run's ID, MANIFOLD_RUN_ID of a flow with an artifact
	// store: Argo passes "{{workflow.name}}", Airflow "{{ run_id }}". Empty, it is
	// the runtime's run (f.Run), else plan.DefaultRunID.
	RunID string
	// TraceParent renders the trace context the step continues (plan.EnvTraceParent)
	// on a target that deploys the flow once for every run: Argo passes a
	// workflow parameter, Airflow the DAG run's conf, which a traced trigger sets
	// and which is otherwise empty. Empty, the pod has no TRACEPARENT: the kube
	// runtime sets it on each object it creates.
	TraceParent string
	// Values, when set, gives the step the directory in which it publishes
	// the values a later step fans out over or branches on (plan.EnvValues):
	// an emptyDir called ValuesVolume mounted at plan.ValuesPath. Only a step
	// that publishes one (plan.Flow.Published) on a target whose engine reads
	// the file from the pod needs it.
	Values bool
}

// ValuesVolume is the volume of a step's published values (PodOptions.Values).
const ValuesVolume = "manifold-values"

// CompletionIndexAnnotation is where an Indexed Job puts a pod's index, which is its
// node rank.
const CompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index"

// Item is a foreach step's item and index as the target renders them: literal
// values for one Job per item, "{{item}}"-style references for Argo.
type Item struct {
	Value, Index string
	// Count is the number of items, set for a fan-out over a run-time value
	// (MANIFOLD_COUNT); "" leaves it out.
	Count string
	// Items, when set, names the ConfigMap that holds every item of a fan-out
	// run as one Indexed Job, whose pods share one spec: a pod's index
	// (MANIFOLD_INDEX) is its completion index, and its item is the file
	// ItemsPath/<index> (MANIFOLD_ITEM_FILE); Value and Index are unused.
	Items string
}

// ItemsVolume is the volume of the ConfigMap of a fan-out's items (Item.Items),
// mounted at ItemsPath.
const (
	ItemsVolume = "manifold-items"
	ItemsPath   = "/manifold/items"
)

// Pod builds the pod template for step s of flow f: container, resources,
// placement, environment, volumes, security context and metadata. Every target
// runs exactly this pod for the step.
func Pod(f *plan.Flow, s *plan.Step, o PodOptions) corev1.PodTemplateSpec {
	c := corev1.Container{
		Name:            plan.ContainerName,
		Image:           s.Image,
		ImagePullPolicy: corev1.PullPolicy(s.ImagePullPolicy),
		Command:         append([]string(nil), s.Command...),
		Env:             Env(f, s, o),
		Resources: corev1.ResourceRequirements{
			Requests: resourceList(s.Requests),
			Limits:   resourceList(s.Limits),
		},
	}
	for _, name := range s.Secrets {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
		}})
	}
	if s.Port > 0 {
		c.Ports = []corev1.ContainerPort{{ContainerPort: int32(s.Port), Protocol: corev1.ProtocolTCP}}
	}

	spec := corev1.PodSpec{
		RestartPolicy:      corev1.RestartPolicyNever,
		ServiceAccountName: s.ServiceAccount,
		NodeSelector:       pairs(s.NodeSelector),
		PriorityClassName:  s.Priority,
	}
	if s.Timeout > 0 {
		spec.ActiveDeadlineSeconds = new(Seconds(s.Timeout))
	}
	for _, t := range s.Tolerations {
		spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Value: t.Value, Effect: corev1.TaintEffect(t.Effect),
		})
	}
	for _, name := range s.ImagePullSecrets {
		spec.ImagePullSecrets = append(spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	c.SecurityContext = containerSecurity(s)
	if s.MountsSharedMemory() {
		shm := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
		if s.SharedMemory != "" {
			shm.SizeLimit = new(resource.MustParse(s.SharedMemory))
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: SharedMemoryVolume, VolumeSource: corev1.VolumeSource{EmptyDir: shm}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: SharedMemoryVolume, MountPath: "/dev/shm"})
	}
	volumes := s.Volumes
	if a := f.Artifacts; a != nil && a.Claim != "" {
		volumes = append(slices.Clip(volumes), plan.Volume{Name: plan.ArtifactVolumeName, Claim: a.Claim, Path: a.URL})
	}
	for _, v := range volumes {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.Claim},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: v.Path})
	}
	if o.Item != nil && o.Item.Items != "" {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: ItemsVolume, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: o.Item.Items}},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: ItemsVolume, MountPath: ItemsPath, ReadOnly: true})
	}
	if o.Values {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: ValuesVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: ValuesVolume, MountPath: plan.ValuesPath})
	}
	if s.HostNetwork {
		// The node's network, and still the cluster's DNS first (the default,
		// ClusterFirst, falls back to the node's resolver under host networking).
		spec.HostNetwork, spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
	}
	spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsUser: s.RunAsUser, RunAsNonRoot: s.RunAsNonRoot,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	spec.ResourceClaims, c.Resources.Claims = podClaims(f, s)
	spec.Containers = []corev1.Container{c}
	spec.Affinity = podAffinity(f, s)

	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: podLabels(f, s), Annotations: podAnnotations(s)},
		Spec:       spec,
	}
}

// containerSecurity returns the step's container security context, as Pod
// Security's restricted level asks: no privilege escalation, every capability
// dropped, and added back only those EFA wiring needs (IPC_LOCK, which needs the
// privileged level). The pod's security context holds the rest: the
// RuntimeDefault seccomp profile, and runAsNonRoot where the plan knows it.
func containerSecurity(s *plan.Step) *corev1.SecurityContext {
	caps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if w := s.EFAWiring; w != nil {
		for _, name := range w.Capabilities {
			caps.Add = append(caps.Add, corev1.Capability(name))
		}
	}
	return &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), Capabilities: caps}
}

// podLabels returns the labels of step s's pods: the step's, and the run's (its
// ID and UID) when f is made for a run.
func podLabels(f *plan.Flow, s *plan.Step) map[string]string {
	labels := pairs(s.Labels)
	for key, v := range map[string]string{plan.LabelRun: f.Run, plan.LabelRunUID: f.RunUID} {
		if v == "" {
			continue
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[key] = v
	}
	return labels
}

// podAnnotations returns the annotations of step s's pods: the step's, and the
// topology level Kueue places a queued step's pods within, which Kueue reads
// from the pod template of each podset (and from a bare pod itself).
func podAnnotations(s *plan.Step) map[string]string {
	annotations := pairs(s.Annotations)
	if s.Topology != "" {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[plan.AnnotationRequiredTopology] = s.Topology
	}
	return annotations
}

// Env returns the container's environment: the flow params, then TRACEPARENT
// (o.TraceParent, when set), then a foreach step's item and index, then the
// artifact store's variables (ArtifactEnv), then MANIFOLD_VALUES (o.Values),
// then a multi-node step's rendezvous
// variables, then EFA wiring's, then the step's own
// variables in declaration order. Putting Manifold's variables first lets the
// step's own refer to them as $(NAME).
func Env(f *plan.Flow, s *plan.Step, o PodOptions) []corev1.EnvVar {
	artifacts := ArtifactEnv(f, s, o)
	var nodes []corev1.EnvVar
	if s.Nodes > 1 {
		nodes = rendezvous(s, o.MasterAddr)
	}
	var wiring []plan.EnvVar
	if w := s.EFAWiring; w != nil {
		wiring = w.Env
	}
	// The list is made once at its length: no spare room that two appends
	// to copies of it could share.
	n := len(f.Params) + len(artifacts) + len(nodes) + len(wiring) + len(s.Env)
	if o.TraceParent != "" {
		n++
	}
	if o.Values {
		n++
	}
	if o.Item != nil {
		n += 2
		if o.Item.Count != "" {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	env := make([]corev1.EnvVar, 0, n)
	for _, p := range f.Params {
		v := p.Value
		if o.Param != nil {
			v = o.Param(p)
		}
		env = append(env, corev1.EnvVar{Name: p.Env, Value: v})
	}
	if o.TraceParent != "" {
		env = append(env, corev1.EnvVar{Name: plan.EnvTraceParent, Value: o.TraceParent})
	}
	if o.Item != nil {
		env = append(env, itemEnv(o.Item)...)
		if o.Item.Count != "" {
			env = append(env, corev1.EnvVar{Name: plan.EnvCount, Value: o.Item.Count})
		}
	}
	env = append(env, artifacts...)
	if o.Values {
		env = append(env, corev1.EnvVar{Name: plan.EnvValues, Value: plan.ValuesPath})
	}
	env = append(env, nodes...)
	env = appendEnvVars(env, wiring)
	return appendEnvVars(env, s.Env)
}

// itemEnv returns the variables of a foreach item: MANIFOLD_ITEM and
// MANIFOLD_INDEX, or, for a fan-out of one Indexed Job (Item.Items),
// MANIFOLD_INDEX from the pod's completion index (by the downward API) and
// MANIFOLD_ITEM_FILE, the file of the items' ConfigMap at that index.
func itemEnv(it *Item) []corev1.EnvVar {
	if it.Items == "" {
		return []corev1.EnvVar{{Name: plan.EnvItem, Value: it.Value}, {Name: plan.EnvIndex, Value: it.Index}}
	}
	return []corev1.EnvVar{
		{Name: plan.EnvIndex, ValueFrom: completionIndex()},
		{Name: plan.EnvItemFile, Value: ItemsPath + "/$(" + plan.EnvIndex + ")"},
	}
}

// completionIndex reads a pod's Indexed Job completion index.
func completionIndex() *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['" + CompletionIndexAnnotation + "']",
	}}
}

// appendEnvVars appends plan variables to env, rendered: a value, or a
// reference to a Secret's key.
func appendEnvVars(env []corev1.EnvVar, vars []plan.EnvVar) []corev1.EnvVar {
	for _, e := range vars {
		if e.SecretName != "" {
			env = append(env, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: e.SecretName},
					Key:                  e.SecretKey,
				},
			}})
			continue
		}
		env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
	}
	return env
}

// ArtifactEnv returns the variables through which step s reaches the flow's
// artifact store, none when the flow has no store:
//
//	MANIFOLD_ARTIFACT_STORE  the store: s3://bucket/prefix, or the volume's mount path
//	MANIFOLD_S3_ENDPOINT     an S3-compatible server's endpoint, when set
//	MANIFOLD_RUN_ID          the run's ID, as the target renders it (o.RunID)
//	MANIFOLD_RUN_DIR         $(MANIFOLD_ARTIFACT_STORE)/<flow>/$(MANIFOLD_RUN_ID)
//	MANIFOLD_ARTIFACTS       $(MANIFOLD_RUN_DIR)/<step>[/$(MANIFOLD_INDEX)]
//
// The last two are built by the kubelet's $(NAME) expansion from the ones before,
// so every target writes them alike and only the run ID's value differs.
func ArtifactEnv(f *plan.Flow, s *plan.Step, o PodOptions) []corev1.EnvVar {
	a := f.Artifacts
	if a == nil {
		return nil
	}
	run := o.RunID
	if run == "" {
		run = f.Run
	}
	if run == "" {
		run = plan.DefaultRunID
	}
	env := []corev1.EnvVar{{Name: plan.EnvArtifactStore, Value: a.URL}}
	if a.Endpoint != "" {
		env = append(env, corev1.EnvVar{Name: plan.EnvS3Endpoint, Value: a.Endpoint})
	}
	step := "$(" + plan.EnvRunDir + ")/" + s.Name
	if o.Item != nil {
		step += "/$(" + plan.EnvIndex + ")"
	}
	return append(env,
		corev1.EnvVar{Name: plan.EnvRunID, Value: run},
		corev1.EnvVar{Name: plan.EnvRunDir, Value: "$(" + plan.EnvArtifactStore + ")/" + f.Name + "/$(" + plan.EnvRunID + ")"},
		corev1.EnvVar{Name: plan.EnvArtifacts, Value: step})
}

// rendezvous returns the variables that let the nodes of a multi-node step find
// each other: Manifold's own, then torchrun's (PET_*), then the Neuron runtime's.
// The rank is the pod's Indexed Job completion index, read through the downward API.
func rendezvous(s *plan.Step, addr string) []corev1.EnvVar {
	rank := completionIndex()
	nodes, port := strconv.Itoa(s.Nodes), strconv.Itoa(s.Port)
	env := []corev1.EnvVar{
		{Name: plan.EnvNodeRank, ValueFrom: rank},
		{Name: plan.EnvNumNodes, Value: nodes},
		{Name: plan.EnvMasterAddr, Value: addr},
		{Name: plan.EnvMasterPort, Value: port},
		{Name: plan.EnvPETNNodes, Value: nodes},
		{Name: plan.EnvPETNodeRank, ValueFrom: rank},
		{Name: plan.EnvPETMasterAddr, Value: addr},
		{Name: plan.EnvPETMasterPort, Value: port},
	}
	if s.Neuron > 0 {
		env = append(env, corev1.EnvVar{Name: plan.EnvNeuronRootComm, Value: addr + ":" + strconv.Itoa(plan.NeuronRootCommPort)})
	}
	return env
}

// podAffinity keeps the pods of a multi-node step apart (one per value of
// s.Apart: per node, by default) and together (in one value of s.Together: one
// zone, for EFA), or nil. Each term matches the step's pods of the same Job
// (matchLabelKeys on the Job's uid, which the Job controller puts on every pod
// it makes), so the pods of other runs, other foreach items and earlier
// attempts neither block nor attract them, on every target alike.
func podAffinity(f *plan.Flow, s *plan.Step) *corev1.Affinity {
	if s.Nodes <= 1 || (s.Apart == "" && s.Together == "") {
		return nil
	}
	term := func(key string) []corev1.PodAffinityTerm {
		return []corev1.PodAffinityTerm{{
			LabelSelector:  &metav1.LabelSelector{MatchLabels: map[string]string{plan.LabelFlow: f.Name, plan.LabelStep: s.Name}},
			MatchLabelKeys: []string{batchv1.ControllerUidLabel},
			TopologyKey:    key,
		}}
	}
	a := &corev1.Affinity{}
	if s.Apart != "" {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term(s.Apart)}
	}
	if s.Together != "" {
		a.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term(s.Together)}
	}
	return a
}

// ItemAt returns the literal foreach item i of s, for targets that make one object
// per item.
func ItemAt(s *plan.Step, i int) *Item {
	return &Item{Value: s.Foreach[i], Index: strconv.Itoa(i)}
}

// Seconds rounds d up to whole seconds, as activeDeadlineSeconds wants.
func Seconds(d time.Duration) int64 {
	return int64(math.Ceil(d.Seconds()))
}

func resourceList(qs []plan.Quantity) corev1.ResourceList {
	if len(qs) == 0 {
		return nil
	}
	l := make(corev1.ResourceList, len(qs))
	for _, q := range qs {
		l[corev1.ResourceName(q.Name)] = resource.MustParse(q.Value)
	}
	return l
}

func pairs(kvs []plan.KeyValue) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}
