// Package podenv works out, for tests, the environment the kubelet gives a
// container: each variable in order, values read through the downward API from
// the pod's metadata, and $(NAME) references to the variables before it expanded
// ($$ standing for $). Tests run a step's program on this machine with it, as the
// step's container would run it.
package podenv

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manifoldflow/manifold/internal/expansion"
)

// Resolve returns the environment of container c of a pod with metadata meta, as
// NAME=VALUE. replace gives, by name, values used instead of the container's own
// (a volume's mount path, for a directory of this machine). A variable read from
// a Secret or ConfigMap is an error: tests have none to read.
func Resolve(meta metav1.ObjectMeta, c corev1.Container, replace map[string]string) ([]string, error) {
	vars := map[string]string{}
	var env []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			var err error
			if v, err = downward(meta, e.ValueFrom); err != nil {
				return nil, fmt.Errorf("variable %s: %w", e.Name, err)
			}
		} else {
			v = expansion.Expand(v, func(name string) (string, bool) {
				val, ok := vars[name]
				return val, ok
			})
		}
		if r, ok := replace[e.Name]; ok {
			v = r
		}
		vars[e.Name] = v
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

// Lookup returns the value of name in env, as Resolve returns it.
func Lookup(env []string, name string) (string, bool) {
	for _, kv := range env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// downward reads a field of the pod's metadata, as the downward API does.
func downward(meta metav1.ObjectMeta, src *corev1.EnvVarSource) (string, error) {
	if src.FieldRef == nil {
		return "", fmt.Errorf("only downward API fields are resolved, not %v", src)
	}
	path := src.FieldRef.FieldPath
	switch path {
	case "metadata.name":
		return meta.Name, nil
	case "metadata.namespace":
		return meta.Namespace, nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": meta.Labels, "metadata.annotations": meta.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("field %s is not resolved", path)
}
