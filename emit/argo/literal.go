package argo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// Argo's controller substitutes "{{...}}" tags throughout a template, twice
// (workflow/common/util.go's SubstituteParams: globals, then inputs, over the
// text the first pass made), and the workflow's params and withItems items are
// substituted into templates as text that the next pass reads again. A "{{"
// that a step's value holds would be taken for a tag. Argo never reads what a
// pod's variable takes from a ConfigMap, though: the kubelet resolves
// valueFrom.configMapKeyRef when it starts the container. And the kubelet
// expands $(NAME) in a container's variables, command and arguments. So the argo
// target writes a value holding "{{" with each "{{" as $(MANIFOLD_BRACES), a
// variable that every step's container takes first, from the flow's ConfigMap
// (Literals), whose one key holds "{{"; the kubelet turns it back into "{{" in
// the container. The rest of the value is rewritten so that the kubelet's
// expansion of it is what the kubelet makes of the value as written on the
// other targets: a $(NAME) reference stays one, "$$" stays "$$", and a "$" that
// the kubelet keeps as it is is escaped where a "$(" written after it would
// otherwise change its meaning (Carry).
//
// Params and foreach items are carried the same way: a param's default and
// each item are written with $(MANIFOLD_BRACES), Argo passes them on as text,
// and they reach the pod in MANIFOLD_PARAM_<NAME> and MANIFOLD_ITEM, whose
// values the kubelet expands. So is the value a run is given for a param
// (runtimes/argo's Trigger writes it with Carry), which is why the steps of a
// flow with params always read MANIFOLD_BRACES.
const (
	// BracesEnv is the variable that holds "{{" in the container of every step
	// of a flow that carries one.
	BracesEnv = "MANIFOLD_BRACES"
	// BracesKey is the key of the flow's ConfigMap that holds "{{".
	BracesKey = "braces"
	// LiteralsFileSuffix ends the name of the file that holds the flow's
	// ConfigMap: <flow>.literals.yaml, written only when a value holds "{{"
	// or the flow has params (a run's value may hold one: see holdsTag).
	// Apply it beside the WorkflowTemplate, in its namespace: a step's
	// container does not start without it.
	LiteralsFileSuffix = ".literals.yaml"
)

// braces is what a "{{" of a value becomes.
const braces = "$(" + BracesEnv + ")"

// Carry returns s written so that it holds no "{{" and so that the kubelet's
// expansion of the result, with BracesEnv defined as "{{", is its expansion of
// s where BracesEnv is not defined, whatever the other variables are.
//
// The kubelet reads a value left to right: "$$" is a "$"; "$(NAME)" is the
// variable NAME's value, or "$(NAME)" itself when there is no such variable;
// "$(" without a ")" after it is kept as it is, and so is a "$" before any
// other byte, together with that byte (which it writes as a rune of its own,
// so a "$" before a byte of a multi-byte character changes that character).
// Carry keeps every reference and each "$" with its byte as written, except
// where the result would read otherwise: a "$(" without ")", and a "$" before
// "{", become "$$(" and "$${"; a reference whose name holds "{{", which names
// no variable (no variable's name holds "{"), becomes the text it expands to;
// and a reference to BracesEnv itself, which the user's value holds as text
// (the variable is defined only where this target carries "{{", and its name
// is reserved), becomes "$$(MANIFOLD_BRACES)", which the kubelet gives back
// as that text. A value holding neither "{{" nor that reference is returned as
// it is.
func Carry(s string) string {
	if !strings.Contains(s, "{{") && !strings.Contains(s, braces) {
		return s
	}
	var b strings.Builder
	text := func(t string) {
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "$", "$$"), "{{", braces))
	}
	for i := 0; i < len(s); {
		j := strings.IndexByte(s[i:], '$')
		if j < 0 {
			text(s[i:])
			break
		}
		text(s[i : i+j])
		i += j
		if i+1 == len(s) { // a "$" at the end stays
			b.WriteByte('$')
			break
		}
		switch next := s[i+1]; next {
		case '$':
			b.WriteString("$$")
			i += 2
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			switch {
			case end < 0: // kept as it is; a ")" written later would close it
				b.WriteString("$$(")
				i += 2
			case strings.Contains(s[i+2:i+2+end], "{{"):
				b.WriteString("$$(")
				text(s[i+2 : i+2+end])
				b.WriteByte(')')
				i += end + 3
			case s[i+2:i+2+end] == BracesEnv:
				// The carrier's own name, as a user wrote it: no variable of
				// that name is defined on the other targets, where the kubelet
				// keeps it as text; written so that it stays text here too.
				b.WriteString("$$(" + BracesEnv + ")")
				i += end + 3
			default:
				b.WriteString(s[i : i+end+3])
				i += end + 3
			}
		case '{':
			// "${" is kept as it is; the "{" may begin a "{{", written as a
			// reference, so the "$" is written as "$$".
			b.WriteString("$$")
			i++
		default:
			b.WriteString(s[i : i+2])
			i += 2
		}
	}
	return b.String()
}

// Substitutable returns an error naming the first character of v that Argo's
// controller cannot substitute into a template, or nil. Argo substitutes a
// workflow parameter's value (a param's default, or the value a run is given)
// and a foreach item into its templates' JSON, each character escaped as Go
// quotes it (util/template's simpleReplace, strconv.Quote), so a character that
// Go writes as \a, \v, \xXX or \UXXXXXXXX (most C0 controls, DEL, the
// characters past U+FFFF that are not printable) is not JSON there, and Argo
// refuses the workflow ("result was invalid JSON"). Nothing stands in for one
// (the kubelet expands "$(NAME)" but no escape).
func Substitutable(v string) error {
	for i, r := range v {
		if r >= 0x20 && r < 0x7f {
			continue
		}
		q := strconv.Quote(string(r))
		var back string
		if json.Unmarshal([]byte(q), &back) == nil && back == string(r) {
			continue
		}
		return fmt.Errorf("holds %U at byte %d, which Argo's substitution writes as %s, not JSON, so Argo refuses the workflow; leave the character out (pass such bytes in a file or an artifact), or compile with --target job, jobset or airflow", r, i, q[1:len(q)-1])
	}
	return nil
}

// carried returns f with every value the argo target writes through the
// kubelet's expansion Carried (the params' defaults, and each step's command,
// variables and foreach items), and whether any value held "{{". f itself is
// never changed: the flow it returns when one did is a copy.
func carried(f *plan.Flow) (*plan.Flow, bool) {
	if !holdsTag(f) {
		return f, false
	}
	carry := func(values []string) []string {
		c := slices.Clone(values)
		for i, v := range c {
			c[i] = Carry(v)
		}
		return c
	}
	out := *f
	out.Params = slices.Clone(f.Params)
	for i := range out.Params {
		out.Params[i].Value = Carry(out.Params[i].Value)
	}
	out.Steps = slices.Clone(f.Steps)
	for i := range out.Steps {
		s := &out.Steps[i]
		s.Command, s.Foreach = carry(s.Command), carry(s.Foreach)
		s.Env = slices.Clone(s.Env)
		for j := range s.Env {
			s.Env[j].Value = Carry(s.Env[j].Value)
		}
	}
	return &out, true
}

// holdsTag reports whether the steps of f read BracesEnv: when a value of f
// that the argo target carries (see carried) holds "{{", and when f has a
// param, whose value a run is given (Trigger carries it as Carry writes it,
// and may hold "{{" or BracesEnv's name), and when f fans out over a value
// found at run time, whose items are carried likewise (ItemExpr). A flow without either is written as
// it is, without a copy.
func holdsTag(f *plan.Flow) bool {
	if len(f.Params) > 0 {
		return true
	}
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.ForeachOf != nil {
			return true // its items are found at run time, and may hold "{{" (ItemExpr)
		}
		if slices.ContainsFunc(s.Command, hasTag) || slices.ContainsFunc(s.Foreach, hasTag) ||
			slices.ContainsFunc(s.Env, func(e plan.EnvVar) bool { return hasTag(e.Value) }) {
			return true
		}
	}
	return false
}

func hasTag(s string) bool { return strings.Contains(s, "{{") }

// LiteralsName is the name of the ConfigMap of the flow called flow.
func LiteralsName(flow string) string { return emit.Name(emit.MaxNameLength, flow, "literals") }

// Literals returns the ConfigMap that holds "{{" for the steps of f, in the
// namespace of its WorkflowTemplate, or nil when no value of f holds one and f
// has no params.
func Literals(f *plan.Flow) *corev1.ConfigMap {
	if !holdsTag(f) {
		return nil
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: objectMeta(f, LiteralsName(f.Name)),
		Data:       map[string]string{BracesKey: "{{"},
	}
}

// literalsFile writes <flow>.literals.yaml when f has a ConfigMap.
func literalsFile(create emit.Create, f *plan.Flow) field.ErrorList {
	cm := Literals(f)
	if cm == nil {
		return nil
	}
	return emit.YAMLStream(create, f.Name+LiteralsFileSuffix,
		fmt.Sprintf("The ConfigMap of flow %s, generated by manifold: apply it beside its WorkflowTemplate; its steps' containers read \"{{\" from it, which Argo would take for a template tag, in a value of the flow or one a run gives its params.", f.Name),
		slices.Values([]any{cm}))
}

// withBraces puts BracesEnv, read from the flow's ConfigMap, first in the
// environment of every container of spec, before every variable whose value
// may refer to it.
func withBraces(flow string, spec *corev1.PodSpec) {
	v := corev1.EnvVar{Name: BracesEnv, ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: LiteralsName(flow)},
		Key:                  BracesKey,
	}}}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = append([]corev1.EnvVar{v}, c.Env...)
	}
}
