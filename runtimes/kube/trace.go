package kube

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// setEnv sets the variable name to value in every container of the pod
// templates of obj, a Job or a JobSet, in place of one the container has.
// Compiled manifests do not hold it: the runner sets it on what it creates.
func setEnv(obj *unstructured.Unstructured, name, value string) {
	switch obj.GetKind() {
	case "Job":
		setTemplateEnv(obj.Object, name, value, "spec", "template", "spec")
	case "JobSet":
		rjs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "replicatedJobs")
		for i, rj := range rjs {
			if m, ok := rj.(map[string]any); ok {
				setTemplateEnv(m, name, value, "template", "spec", "template", "spec")
				rjs[i] = m
			}
		}
		_ = unstructured.SetNestedSlice(obj.Object, rjs, "spec", "replicatedJobs")
	}
}

// setTemplateEnv sets name to value in the containers of the pod spec at path
// in m.
func setTemplateEnv(m map[string]any, name, value string, path ...string) {
	spec, ok, _ := unstructured.NestedMap(m, path...)
	if !ok {
		return
	}
	cs, _ := spec["containers"].([]any)
	for _, c := range cs {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		env, _ := cm["env"].([]any)
		out := make([]any, 0, len(env)+1)
		for _, e := range env {
			if em, ok := e.(map[string]any); ok && em["name"] == name {
				continue
			}
			out = append(out, e)
		}
		cm["env"] = append(out, map[string]any{"name": name, "value": value})
	}
	_ = unstructured.SetNestedMap(m, spec, path...)
}
