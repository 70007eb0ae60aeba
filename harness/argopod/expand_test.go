package argopod_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/harness/argopod"
)

// TestCanonical: the kubelet's reading of a value, as Kubernetes documents and
// implements it (expansion_test.go's cases among them).
func TestCanonical(t *testing.T) {
	vars := map[string]string{"A": "a$", "B": "{{"}
	for _, c := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a$$"},                 // a variable's value, its "$" as written
		{"$$(A)", "$$(A)"},              // escaped: the text "$(A)"
		{"$(C)", "$(C)"},                // a variable it does not know: a reference
		{"$(a{b)", "$$(a{b)"},           // no variable has that name: text
		{"$(A", "$$(A"},                 // no ")": text
		{"$x$", "$$x$$"},                // "$" before another byte, and at the end
		{"$\xc3\xa9", "$$\xc3\x83\xa9"}, // the byte after "$" written as a rune
		{"$$$(B)", "$${{"},
	} {
		if got := argopod.Canonical(c.in, vars); got != c.want {
			t.Errorf("Canonical(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if argopod.Canonical("$(A)", nil) == argopod.Canonical("$$(A)", nil) {
		t.Error("a reference and the escaped text read alike")
	}
}

// TestExpanded: a variable read from a ConfigMap is defined for the variables
// after it and for the command, not for those before it.
func TestExpanded(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Data: map[string]string{"k": "{{"}}
	ref := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "m"}, Key: "k"}}
	c := corev1.Container{
		Command: []string{"$(L)x"},
		Env:     []corev1.EnvVar{{Name: "BEFORE", Value: "$(L)"}, {Name: "L", ValueFrom: ref}, {Name: "AFTER", Value: "$(L)"}},
	}
	got, err := argopod.Expanded(c, cm)
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.EnvVar{{Name: "BEFORE", Value: "$(L)"}, {Name: "AFTER", Value: "{{"}}
	if len(got.Env) != 2 || got.Env[0] != want[0] || got.Env[1] != want[1] || got.Command[0] != "{{x" {
		t.Errorf("got env %v, command %q; want %v, %q", got.Env, got.Command, want, "{{x")
	}
	if _, err := argopod.Expanded(c); err == nil {
		t.Error("a variable from a ConfigMap not given was not an error")
	}
}
