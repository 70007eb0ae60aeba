package emit_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

func ptr[T any](v T) *T { return &v }

// fullStep sets every field the pod builder reads.
func fullStep() (*plan.Flow, *plan.Step) {
	s := plan.Step{
		Name:             "train",
		Body:             plan.BodyCommand,
		Command:          []string{"torchrun", "train.py"},
		Image:            "example.com/train:v1",
		ImagePullPolicy:  "IfNotPresent",
		ImagePullSecrets: []string{"ecr", "ngc"},
		ServiceAccount:   "trainer",
		Requests:         []plan.Quantity{{Name: "aws.amazon.com/neuron", Value: "16"}, {Name: "cpu", Value: "4"}, {Name: "vpc.amazonaws.com/efa", Value: "8"}},
		Limits:           []plan.Quantity{{Name: "aws.amazon.com/neuron", Value: "16"}, {Name: "vpc.amazonaws.com/efa", Value: "8"}},
		SharedMemory:     "64Gi",
		NodeSelector:     []plan.KeyValue{{Key: "node.kubernetes.io/instance-type", Value: "trn1.32xlarge"}},
		Tolerations: []plan.Toleration{
			{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"},
			{Key: "aws.amazon.com/neuron", Operator: "Exists", Effect: "NoSchedule"},
		},
		Env: []plan.EnvVar{
			{Name: "B", Value: "2"},
			{Name: "TOKEN", SecretName: "hf", SecretKey: "token"},
			{Name: "A", Value: "1"},
		},
		Secrets:      []string{"wandb"},
		Labels:       []plan.KeyValue{{Key: "manifold.dev/step", Value: "train"}, {Key: "team", Value: "ml"}},
		Annotations:  []plan.KeyValue{{Key: "note", Value: "x"}},
		Volumes:      []plan.Volume{{Name: "pvc-0", Claim: "data", Path: "/data"}},
		Port:         29500,
		RunAsUser:    ptr(int64(1000)),
		RunAsNonRoot: ptr(true),
		Timeout:      90*time.Minute + 500*time.Millisecond,
	}
	f := &plan.Flow{Name: "f", Params: []plan.Param{{Name: "epochs", Value: "3", Env: "MANIFOLD_PARAM_EPOCHS"}}, Steps: []plan.Step{s}}
	return f, &f.Steps[0]
}

func TestPodCarriesEveryField(t *testing.T) {
	f, s := fullStep()
	shm := resource.MustParse("64Gi")
	want := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"manifold.dev/step": "train", "team": "ml"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:         corev1.RestartPolicyNever,
			ActiveDeadlineSeconds: ptr(int64(5401)),
			ServiceAccountName:    "trainer",
			NodeSelector:          map[string]string{"node.kubernetes.io/instance-type": "trn1.32xlarge"},
			Tolerations: []corev1.Toleration{
				{Key: "dedicated", Operator: "Equal", Value: "ml", Effect: "NoSchedule"},
				{Key: "aws.amazon.com/neuron", Operator: "Exists", Effect: "NoSchedule"},
			},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "ecr"}, {Name: "ngc"}},
			SecurityContext:  &corev1.PodSecurityContext{RunAsUser: ptr(int64(1000)), RunAsNonRoot: ptr(true), SeccompProfile: runtimeDefault},
			Volumes: []corev1.Volume{
				{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &shm}}},
				{Name: "pvc-0", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
			},
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           "example.com/train:v1",
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"torchrun", "train.py"},
				Env: []corev1.EnvVar{
					{Name: "MANIFOLD_PARAM_EPOCHS", Value: "3"},
					{Name: "B", Value: "2"},
					{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}},
					{Name: "A", Value: "1"},
				},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "wandb"}}}},
				Ports:   []corev1.ContainerPort{{ContainerPort: 29500, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						"aws.amazon.com/neuron": resource.MustParse("16"),
						"cpu":                   resource.MustParse("4"),
						"vpc.amazonaws.com/efa": resource.MustParse("8"),
					},
					Limits: corev1.ResourceList{
						"aws.amazon.com/neuron": resource.MustParse("16"),
						"vpc.amazonaws.com/efa": resource.MustParse("8"),
					},
				},
				VolumeMounts:    []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}, {Name: "pvc-0", MountPath: "/data"}},
				SecurityContext: restricted(),
			}},
		},
	}
	got := emit.Pod(f, s, emit.PodOptions{})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pod (-want +got):\n%s", diff)
	}
}

// runtimeDefault is the seccomp profile of every pod.
var runtimeDefault = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}

// restricted is the security context of every container without EFA wiring.
func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{AllowPrivilegeEscalation: ptr(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
}

// TestPodMinimalHasNoEmptyFields: a step that sets nothing gets a pod with
// nothing but its container and what Pod Security's restricted level asks of
// every pod; runAsNonRoot is left to the image, which may run as root.
func TestPodMinimalHasNoEmptyFields(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a", Image: "busybox", Command: []string{"true"}}}}
	got := emit.Pod(f, &f.Steps[0], emit.PodOptions{})
	want := corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy:   corev1.RestartPolicyNever,
		SecurityContext: &corev1.PodSecurityContext{SeccompProfile: runtimeDefault},
		Containers:      []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"true"}, SecurityContext: restricted()}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Pod (-want +got):\n%s", diff)
	}
}

func TestEnvOrderWithParamsAndItem(t *testing.T) {
	f, s := fullStep()
	f.Params = append(f.Params, plan.Param{Name: "lr", Value: "0.1", Env: "MANIFOLD_PARAM_LR"})
	got := emit.Env(f, s, emit.PodOptions{
		Param: func(p plan.Param) string { return "{{workflow.parameters." + p.Name + "}}" },
		Item:  &emit.Item{Value: "{{item}}", Index: "{{index}}"},
	})
	var names, values []string
	for _, e := range got {
		names = append(names, e.Name)
		values = append(values, e.Value)
	}
	wantNames := []string{"MANIFOLD_PARAM_EPOCHS", "MANIFOLD_PARAM_LR", "MANIFOLD_ITEM", "MANIFOLD_INDEX", "B", "TOKEN", "A"}
	wantValues := []string{"{{workflow.parameters.epochs}}", "{{workflow.parameters.lr}}", "{{item}}", "{{index}}", "2", "", "1"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("env names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantValues, values); diff != "" {
		t.Errorf("env values (-want +got):\n%s", diff)
	}
}

func TestPodDoesNotAliasThePlan(t *testing.T) {
	f, s := fullStep()
	pod := emit.Pod(f, s, emit.PodOptions{})
	pod.Spec.Containers[0].Command[0] = "changed"
	if s.Command[0] != "torchrun" {
		t.Errorf("changing the pod changed the plan's command: %q", s.Command[0])
	}
}

func TestItemAt(t *testing.T) {
	s := &plan.Step{Foreach: []string{"a", "b"}}
	if got, want := *emit.ItemAt(s, 1), (emit.Item{Value: "b", Index: "1"}); got != want {
		t.Errorf("ItemAt(1) = %+v, want %+v", got, want)
	}
}

func TestSecondsRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{{time.Second, 1}, {1500 * time.Millisecond, 2}, {6 * time.Hour, 21600}} {
		if got := emit.Seconds(tc.d); got != tc.want {
			t.Errorf("Seconds(%s) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

func TestRendezvousEnv(t *testing.T) {
	f, s := fullStep()
	s.Nodes, s.Neuron = 2, 16
	got := emit.Env(f, s, emit.PodOptions{Item: &emit.Item{Value: "x", Index: "0"}, MasterAddr: "f-train-0.f-train"})
	rank := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
	want := []corev1.EnvVar{
		{Name: "MANIFOLD_PARAM_EPOCHS", Value: "3"},
		{Name: "MANIFOLD_ITEM", Value: "x"},
		{Name: "MANIFOLD_INDEX", Value: "0"},
		{Name: "MANIFOLD_NODE_RANK", ValueFrom: rank},
		{Name: "MANIFOLD_NUM_NODES", Value: "2"},
		{Name: "MASTER_ADDR", Value: "f-train-0.f-train"},
		{Name: "MASTER_PORT", Value: "29500"},
		{Name: "PET_NNODES", Value: "2"},
		{Name: "PET_NODE_RANK", ValueFrom: rank},
		{Name: "PET_MASTER_ADDR", Value: "f-train-0.f-train"},
		{Name: "PET_MASTER_PORT", Value: "29500"},
		{Name: "NEURON_RT_ROOT_COMM_ID", Value: "f-train-0.f-train:46820"},
		{Name: "B", Value: "2"},
		{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}},
		{Name: "A", Value: "1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}

	// Without Trainium there is no Neuron runtime to point; with one node, no rendezvous.
	s.Neuron = 0
	if env := emit.Env(f, s, emit.PodOptions{MasterAddr: "m"}); hasEnv(env, "NEURON_RT_ROOT_COMM_ID") || !hasEnv(env, "MASTER_ADDR") {
		t.Errorf("GPU step env = %v, want MASTER_ADDR and no NEURON_RT_ROOT_COMM_ID", env)
	}
	s.Nodes = 1
	if env := emit.Env(f, s, emit.PodOptions{MasterAddr: "m"}); hasEnv(env, "MASTER_ADDR") || hasEnv(env, "MANIFOLD_NODE_RANK") {
		t.Errorf("one-node step env = %v, want no rendezvous", env)
	}
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

func TestPodWithEFAWiring(t *testing.T) {
	f, s := fullStep()
	s.SharedMemory = ""
	s.Volumes = nil
	s.EFAWiring = &plan.Wiring{Arch: plan.ArchX86, Env: []plan.EnvVar{{Name: "FI_PROVIDER", Value: "efa"}}, Capabilities: []string{"IPC_LOCK"}}
	pod := emit.Pod(f, s, emit.PodOptions{})
	c := pod.Spec.Containers[0]
	// Every capability dropped, IPC_LOCK the one added back.
	want := restricted()
	want.Capabilities.Add = []corev1.Capability{"IPC_LOCK"}
	if diff := cmp.Diff(want, c.SecurityContext); diff != "" {
		t.Errorf("container security context (-want +got):\n%s", diff)
	}
	// A memory-backed /dev/shm without a size limit: the pod's memory bounds it.
	wantVolumes := []corev1.Volume{{Name: emit.SharedMemoryVolume, VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory},
	}}}
	if diff := cmp.Diff(wantVolumes, pod.Spec.Volumes); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: emit.SharedMemoryVolume, MountPath: "/dev/shm"}}, c.VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	// Wiring's variables come after Manifold's and before the step's own.
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	if diff := cmp.Diff([]string{"MANIFOLD_PARAM_EPOCHS", "FI_PROVIDER", "B", "TOKEN", "A"}, names); diff != "" {
		t.Errorf("env names (-want +got):\n%s", diff)
	}
}

// TestEnvHasNoSpareRoom checks that the variables are made at their length:
// an append to the list of one pod (or a copy of it) never writes into
// another's.
func TestEnvHasNoSpareRoom(t *testing.T) {
	f, s := fullStep()
	s.Nodes, s.Neuron = 2, 16
	s.EFAWiring = &plan.Wiring{Arch: plan.ArchX86, Env: []plan.EnvVar{{Name: "FI_PROVIDER", Value: "efa"}}}
	for _, o := range []emit.PodOptions{
		{},
		{TraceParent: "{{tp}}", Item: &emit.Item{Value: "x", Index: "0"}, MasterAddr: "m"},
	} {
		env := emit.Env(f, s, o)
		if len(env) == 0 || cap(env) != len(env) {
			t.Errorf("options %+v: %d variables with room for %d, want as many", o, len(env), cap(env))
		}
		a := append(env, corev1.EnvVar{Name: "X"})
		b := append(env, corev1.EnvVar{Name: "Y"})
		if a[len(env)].Name != "X" || b[len(env)].Name != "Y" {
			t.Errorf("options %+v: two appends to the variables share their room", o)
		}
	}
}

// TestPodValues: PodOptions.Values gives the pod MANIFOLD_VALUES, after the
// artifact store's variables, and an emptyDir mounted there; without it the
// pod has neither.
func TestPodValues(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "list", Image: "x"}}}
	s := &f.Steps[0]
	pod := emit.Pod(f, s, emit.PodOptions{Values: true})
	c := pod.Spec.Containers[0]
	if len(c.Env) != 1 || c.Env[0].Name != plan.EnvValues || c.Env[0].Value != plan.ValuesPath {
		t.Errorf("env %v, want only %s=%s", c.Env, plan.EnvValues, plan.ValuesPath)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != plan.ValuesPath || c.VolumeMounts[0].Name != emit.ValuesVolume {
		t.Errorf("mounts %v", c.VolumeMounts)
	}
	if len(pod.Spec.Volumes) != 1 || pod.Spec.Volumes[0].EmptyDir == nil {
		t.Errorf("volumes %v", pod.Spec.Volumes)
	}
	pod = emit.Pod(f, s, emit.PodOptions{})
	if len(pod.Spec.Containers[0].Env) != 0 || len(pod.Spec.Volumes) != 0 {
		t.Errorf("without Values: env %v, volumes %v", pod.Spec.Containers[0].Env, pod.Spec.Volumes)
	}
}
