package emit_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// TestArtifactEnv: with an S3 store, every pod gets the store, its endpoint, the
// run ID and the run's and step's locations, after the foreach variables (which
// MANIFOLD_ARTIFACTS refers to) and before the rendezvous and the step's own.
func TestArtifactEnv(t *testing.T) {
	f, s := fullStep()
	f.Artifacts = &plan.Artifacts{URL: "s3://ml-artifacts/flows", Endpoint: "http://minio:9000"}
	s.Nodes = 2
	got := emit.Env(f, s, emit.PodOptions{Item: &emit.Item{Value: "x", Index: "3"}, MasterAddr: "m", RunID: "{{workflow.name}}"})
	var names []string
	for _, e := range got {
		names = append(names, e.Name)
	}
	wantNames := []string{"MANIFOLD_PARAM_EPOCHS", "MANIFOLD_ITEM", "MANIFOLD_INDEX",
		"MANIFOLD_ARTIFACT_STORE", "MANIFOLD_S3_ENDPOINT", "MANIFOLD_RUN_ID", "MANIFOLD_RUN_DIR", "MANIFOLD_ARTIFACTS",
		"MANIFOLD_NODE_RANK", "MANIFOLD_NUM_NODES", "MASTER_ADDR", "MASTER_PORT", "PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT",
		"B", "TOKEN", "A"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("env names (-want +got):\n%s", diff)
	}
	want := []corev1.EnvVar{
		{Name: "MANIFOLD_ARTIFACT_STORE", Value: "s3://ml-artifacts/flows"},
		{Name: "MANIFOLD_S3_ENDPOINT", Value: "http://minio:9000"},
		{Name: "MANIFOLD_RUN_ID", Value: "{{workflow.name}}"},
		{Name: "MANIFOLD_RUN_DIR", Value: "$(MANIFOLD_ARTIFACT_STORE)/f/$(MANIFOLD_RUN_ID)"},
		{Name: "MANIFOLD_ARTIFACTS", Value: "$(MANIFOLD_RUN_DIR)/train/$(MANIFOLD_INDEX)"},
	}
	if diff := cmp.Diff(want, got[3:8]); diff != "" {
		t.Errorf("artifact variables (-want +got):\n%s", diff)
	}
}

// TestArtifactRunID: the run ID is the target's (o.RunID), else the runtime's run,
// else plan.DefaultRunID; without a store nothing changes.
func TestArtifactRunID(t *testing.T) {
	f := &plan.Flow{Name: "f", Steps: []plan.Step{{Name: "a", Image: "busybox", Command: []string{"true"}}}}
	s := &f.Steps[0]
	before := emit.Pod(f, s, emit.PodOptions{RunID: "ignored"})
	if len(before.Spec.Containers[0].Env) != 0 || len(before.Spec.Volumes) != 0 {
		t.Fatalf("a flow without a store got %v and volumes %v", before.Spec.Containers[0].Env, before.Spec.Volumes)
	}
	f.Artifacts = &plan.Artifacts{URL: "s3://b"}
	runID := func(o emit.PodOptions) string {
		for _, e := range emit.Env(f, s, o) {
			if e.Name == plan.EnvRunID {
				return e.Value
			}
		}
		t.Fatal("no MANIFOLD_RUN_ID")
		return ""
	}
	if got := runID(emit.PodOptions{}); got != "default" {
		t.Errorf("compiled run ID = %q, want default", got)
	}
	f.Run = "20261203-071128-5a1f0e"
	if got := runID(emit.PodOptions{}); got != f.Run {
		t.Errorf("runtime's run ID = %q, want %q", got, f.Run)
	}
	if got := runID(emit.PodOptions{RunID: "{{ run_id }}"}); got != "{{ run_id }}" {
		t.Errorf("target's run ID = %q", got)
	}
	for _, e := range emit.Env(f, s, emit.PodOptions{}) {
		if e.Name == plan.EnvS3Endpoint {
			t.Errorf("a store without an endpoint set %s", e.Name)
		}
		if e.Name == plan.EnvArtifacts && e.Value != "$(MANIFOLD_RUN_DIR)/a" {
			t.Errorf("%s = %q, want $(MANIFOLD_RUN_DIR)/a", e.Name, e.Value)
		}
	}
}

// TestArtifactVolume: a volume store mounts its claim at the same path in every
// pod, after the step's own volumes.
func TestArtifactVolume(t *testing.T) {
	f, s := fullStep()
	f.Artifacts = &plan.Artifacts{URL: plan.ArtifactVolumePath, Claim: "shared"}
	pod := emit.Pod(f, s, emit.PodOptions{})
	var names []string
	for _, v := range pod.Spec.Volumes {
		names = append(names, v.Name)
	}
	if diff := cmp.Diff([]string{"dshm", "pvc-0", "manifold-artifacts"}, names); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	v := pod.Spec.Volumes[2]
	if v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != "shared" || v.PersistentVolumeClaim.ReadOnly {
		t.Errorf("artifact volume %+v, want claim shared, writable", v)
	}
	mounts := pod.Spec.Containers[0].VolumeMounts
	if diff := cmp.Diff(corev1.VolumeMount{Name: "manifold-artifacts", MountPath: "/manifold/artifacts"}, mounts[len(mounts)-1]); diff != "" {
		t.Errorf("last mount (-want +got):\n%s", diff)
	}
	if len(s.Volumes) != 1 {
		t.Errorf("building the pod changed the plan's volumes: %v", s.Volumes)
	}
	env := emit.Env(f, s, emit.PodOptions{})
	if !cmp.Equal(env[1], corev1.EnvVar{Name: "MANIFOLD_ARTIFACT_STORE", Value: "/manifold/artifacts"}) || env[2].Name != "MANIFOLD_RUN_ID" {
		t.Errorf("env %v: want the mount path as the store, then the run ID", env[:3])
	}
}
