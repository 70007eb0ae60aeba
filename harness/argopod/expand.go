package argopod

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/manifoldflow/manifold/emit/argo"
)

// variableName matches the names a variable of a Manifold pod can have: those
// compile lets a step's variables have (Kubernetes' IsEnvVarName), and the
// Secret keys that envFrom makes variables.
var variableName = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// Canonical returns value s as the kubelet expands it in a container where the
// variables vars are defined (by name), written back as a value: the bytes the
// kubelet makes, each "$" as "$$", and each reference to any other variable as
// "$(NAME)", unless no variable of a Manifold pod can be called NAME, which
// the kubelet then writes as it is. argo.BracesEnv, a name Manifold reserves,
// is defined only where vars defines it (the argo target's steps that carry
// "{{"); a reference to it elsewhere is written as the text it stays. Whatever the container's other variables
// hold, two values with the same Canonical form reach the container as the same
// bytes.
//
// The kubelet (third_party/forked/golang/expansion in Kubernetes) reads s left
// to right: "$$" is "$"; "$(NAME)" is NAME's value, or "$(NAME)" itself for a
// variable it does not have; "$(" without a ")" after it stays as it is; a "$"
// before any other byte stays, with that byte written as the rune of its
// value; a "$" at the end stays.
func Canonical(s string, vars map[string]string) string {
	var b strings.Builder
	text := func(t string) { b.WriteString(strings.ReplaceAll(t, "$", "$$")) }
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			text(s[i : i+1])
			continue
		}
		switch s[i+1] {
		case '$':
			text("$")
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				text("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				text(v)
			} else if !variableName.MatchString(name) || name == argo.BracesEnv {
				text("$(" + name + ")")
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += end + 2
		default:
			text("$" + string(rune(s[i+1])))
			i++
		}
	}
	return b.String()
}

// Expanded returns container c as the kubelet gives it its values: without the
// variables it reads from configMaps, and with every other variable's value in
// Canonical form with the variables read before it defined, and its command and
// arguments with all of them defined. Comparing a target's container with
// another's this way shows whether the same bytes reach both. A variable read
// from a ConfigMap that is not in configMaps, or from a key it lacks, is an
// error.
func Expanded(c corev1.Container, configMaps ...*corev1.ConfigMap) (corev1.Container, error) {
	out := *c.DeepCopy()
	out.Env = nil
	vars := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			e.Value = Canonical(e.Value, vars)
			out.Env = append(out.Env, e)
			continue
		}
		ref := e.ValueFrom.ConfigMapKeyRef
		if ref == nil {
			out.Env = append(out.Env, *e.DeepCopy())
			continue
		}
		found := false
		for _, cm := range configMaps {
			if v, ok := cm.Data[ref.Key]; ok && cm.Name == ref.Name {
				vars[e.Name], found = v, true
			}
		}
		if !found {
			return c, fmt.Errorf("variable %s: no key %q in ConfigMap %q", e.Name, ref.Key, ref.Name)
		}
	}
	for i := range out.Command {
		out.Command[i] = Canonical(out.Command[i], vars)
	}
	for i := range out.Args {
		out.Args[i] = Canonical(out.Args[i], vars)
	}
	return out, nil
}
