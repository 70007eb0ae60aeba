package examples_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/argopod"
	"github.com/manifoldflow/manifold/harness/exampletest"
	"github.com/manifoldflow/manifold/harness/podenv"
	"github.com/manifoldflow/manifold/internal/expansion"
	"github.com/manifoldflow/manifold/plan"
)

// hostileNames are values of hello's name param that a shell would run, were
// they written into its script.
var hostileNames = []string{
	`x"; echo INJECTED-$(id -un); echo "`,
	"x'; echo INJECTED; echo '",
	"`echo INJECTED`",
	"$(echo INJECTED) $HOME \\ ${PATH} * ~",
}

// TestHelloParamIsDataInPods: hello's Command step, as the pod of the job
// target and the pod Argo's controller makes of the argo target (the param
// substituted as Argo substitutes it), prints the name param as it was given:
// the container's variables and command are expanded as the kubelet expands
// them, and the command runs in this machine's sh, as busybox's would.
func TestHelloParamIsDataInPods(t *testing.T) {
	bin := exampletest.Build(t)["hello"]
	for _, name := range hostileNames {
		job := echoContainer(t, bin, "job", name)
		argoPod := echoContainer(t, bin, "argo", name)
		for target, c := range map[string]corev1.Container{"job": job, "argo": argoPod} {
			env, err := podenv.Resolve(metav1.ObjectMeta{}, c, nil)
			if err != nil {
				t.Fatal(err)
			}
			vars := map[string]string{}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				vars[k] = v
			}
			var argv []string
			for _, a := range slices.Concat(c.Command, c.Args) {
				argv = append(argv, expansion.Expand(a, func(n string) (string, bool) { v, ok := vars[n]; return v, ok }))
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent"}, env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: param %q: %v\n%s", target, name, err, out)
			}
			if diff := cmp.Diff("hello, "+name+", from a Command step\n", string(out)); diff != "" {
				t.Errorf("%s: param %q: echo printed (-want +got):\n%s", target, name, diff)
			}
		}
	}
}

// echoContainer compiles hello for target with the name param and returns the
// container of its echo step's pod: the Job's, or the one Argo makes, with each
// variable it reads from a ConfigMap of the output (the argo target's
// <flow>-literals) given that ConfigMap's value, as the kubelet gives it.
func echoContainer(t *testing.T, bin, target, name string) corev1.Container {
	t.Helper()
	cmd := exec.Command(bin, "compile", "--target", target, "--param", "name="+name)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compile --target %s: %v", target, err)
	}
	var found *corev1.Container
	configMaps := map[string]map[string]string{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Job":
			var j struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &j); err != nil {
				t.Fatal(err)
			}
			if j.Spec.Template.Labels[plan.LabelStep] == "echo" {
				found = &j.Spec.Template.Spec.Containers[0]
			}
		case "WorkflowTemplate":
			var wt wfv1.WorkflowTemplate
			if err := yaml.Unmarshal([]byte(doc), &wt); err != nil {
				t.Fatal(err)
			}
			pod, err := argopod.Resolve(&wt, argo.TaskName("echo"), 0)
			if err != nil {
				t.Fatal(err)
			}
			found = &pod.Spec.Containers[0]
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
				t.Fatal(err)
			}
			configMaps[cm.Name] = cm.Data
		}
	}
	if found == nil {
		t.Fatalf("compile --target %s: no echo step", target)
	}
	c := *found.DeepCopy()
	for i, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.ConfigMapKeyRef
		v, ok := configMaps[ref.Name][ref.Key]
		if !ok {
			t.Fatalf("compile --target %s: variable %s reads key %s of ConfigMap %s, which the output does not hold", target, e.Name, ref.Key, ref.Name)
		}
		c.Env[i] = corev1.EnvVar{Name: e.Name, Value: v}
	}
	return c
}
