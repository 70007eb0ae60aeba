package encode_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/emit/encode"
)

func TestYAMLDropsNoiseAndKeepsMeaning(t *testing.T) {
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "j"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "busybox"}},
			Volumes:       []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		}}},
	}
	got, err := encode.YAML("header line", job, job)
	if err != nil {
		t.Fatal(err)
	}
	doc := `apiVersion: batch/v1
kind: Job
metadata:
  name: j
spec:
  template:
    spec:
      containers:
      - image: busybox
        name: main
      restartPolicy: Never
      volumes:
      - emptyDir: {}
        name: scratch
`
	want := "# header line\n---\n" + doc + "---\n" + doc
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	for _, noise := range []string{"creationTimestamp", "status", "resources"} {
		if strings.Contains(string(got), noise) {
			t.Errorf("output carries %q", noise)
		}
	}
}

func TestYAMLWithoutHeader(t *testing.T) {
	got, err := encode.YAML("", map[string]any{"a": 1}, map[string]any{"b": nil, "c": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	// An empty map under a key that is not noise is kept; nulls go.
	if want := "a: 1\n---\nc: {}\n"; string(got) != want {
		t.Errorf("YAML = %q, want %q", got, want)
	}
}

func TestYAMLDropsStatus(t *testing.T) {
	type counters struct {
		Restarts int `json:"restarts"`
	}
	obj := struct {
		Kind   string   `json:"kind"`
		Status counters `json:"status"`
		Spec   counters `json:"spec"`
	}{Kind: "JobSet"}
	got, err := encode.YAML("", obj)
	if err != nil {
		t.Fatal(err)
	}
	if want := "kind: JobSet\nspec:\n  restarts: 0\n"; string(got) != want {
		t.Errorf("YAML = %q, want %q", got, want)
	}
}

// TestJSONDropsNoiseLikeYAML: JSON cleans an object as YAML does, keeps <, > and &
// as they are, and indents each level as asked.
func TestJSONDropsNoiseLikeYAML(t *testing.T) {
	job := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "j", Annotations: map[string]string{"a": "<b> & c"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main"}},
		}}},
	}
	got, err := encode.JSON(job, "")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"batch/v1","kind":"Job","metadata":{"annotations":{"a":"<b> & c"},"name":"j"},"spec":{"template":{"spec":{"containers":[{"name":"main"}]}}}}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	indented, err := encode.JSON(job, " ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(indented), "{\n \"apiVersion\": \"batch/v1\",\n \"kind\": \"Job\",\n") || strings.HasSuffix(string(indented), "\n") {
		t.Errorf("indented JSON:\n%s", indented)
	}
}
