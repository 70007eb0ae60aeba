package local

import "github.com/manifoldflow/manifold/internal/expansion"

// expand replaces $(NAME) references in s the way the kubelet does for a container's
// command and environment, so a step behaves the same here as on a cluster:
// $(NAME) becomes the value of NAME when vars has it and stays as written when it
// does not, $$ becomes $, and any other $ is kept.
func expand(s string, vars map[string]string) string {
	return expansion.Expand(s, func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	})
}
