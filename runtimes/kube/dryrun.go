package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/manifoldflow/manifold/internal/kubeclient"
	"github.com/manifoldflow/manifold/plan"
)

// podGVR is the resource of the pods a dry run wraps each step's pod template in.
var podGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Bounds of a dry run: how many requests are in flight at once, and how many
// times the run's own request rate (Options.QPS, --qps) its client may send
// them at (200 a second with the default 50). A dry run writes nothing; its
// requests cost the API server admission and a read, and its priority and
// fairness still apply.
const (
	dryRunWorkers   = 16
	dryRunRateTimes = 4
)

// Refusal is an object of a run that the cluster's admission refuses, as a
// server-side dry run of it told before anything was created: Pod Security, a
// LimitRange, a ResourceQuota, a validating webhook or admission policy, or the
// API server's own validation.
type Refusal struct {
	// Step is the step, Label the step or its item (step[index]).
	Step, Label string
	// Object is what was refused: "Job NAME", "JobSet NAME", "pod of Job NAME"
	// (the pod its controller would make).
	Object string
	// Field is the field at fault, when the cluster names it, or "".
	Field string
	// By is what refused it, such as pod-security.kubernetes.io/enforce=restricted
	// of a namespace, LimitRange NAME, ResourceQuota NAME or the admission
	// webhook NAME.
	By string
	// Message is the cluster's own words, and Todo what to do about them.
	Message, Todo string
}

// Reason is the refusal without the step: what refused which object, why, and
// what to do.
func (r Refusal) Reason() string {
	field := ""
	if r.Field != "" {
		field = " (" + r.Field + ")"
	}
	return fmt.Sprintf("%s refuses its %s%s: %s; %s", r.By, r.Object, field, r.Message, r.Todo)
}

// String is the refusal on one line, naming the step.
func (r Refusal) String() string { return "step " + r.Label + ": " + r.Reason() }

// RefusedError is what Run returns when the cluster's admission refuses
// something the run would create (see Refusal); nothing was created.
type RefusedError struct {
	Cluster  string
	Refusals []Refusal
}

// Error names each refusal, one per line.
func (e *RefusedError) Error() string {
	lines := make([]string, 0, len(e.Refusals)+1)
	for _, r := range e.Refusals {
		lines = append(lines, r.String())
	}
	return strings.Join(lines, "\n") + "\n(a dry run on the cluster at " + e.Cluster + " refused it; nothing was created)"
}

// ask is one object to dry-run, for the units that would create it (or one
// alike).
type ask struct {
	gvr    schema.GroupVersionResource
	obj    *unstructured.Unstructured
	what   string // "Job NAME", "pod of Job NAME"
	unit   *unit
	shared int // how many units' objects of this shape it stands for
}

// dryRun asks the API server to admit, without persisting anything
// (dryRun=All), every object units would create and, wrapped as a Pod, the pod
// template of each Job or JobSet: a Job's pods are admitted only when its
// controller makes them, and a pod refused then (by Pod Security, a LimitRange,
// a quota that could never hold it, a webhook) leaves the Job making none, in
// silence. Objects that differ only in their names and a foreach item's index
// and value are asked once. It returns what the cluster refuses and notes on
// what could not be asked (RBAC that does not let this user create pods, a
// webhook that does not take dry runs, a quota full for now); the error is for
// a cluster that did not answer.
func (c *cluster) dryRun(ctx context.Context, units []*unit) ([]Refusal, []string, error) {
	var notes []string
	// Creating what the run creates is asked of RBAC before (preflight), but for
	// pods, which the controllers create: a user who may not create pods cannot
	// dry-run them.
	noPods := map[string]bool{}
	for _, ns := range unitNamespaces(units) {
		ok, err := c.allowed(ctx, ns, access{verb: "create", resource: "pods"}) // podDryRun
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			noPods[ns] = true
			notes = append(notes, refused{ns: ns, verb: "create", need: podDryRun}.note())
		}
	}
	asks, err := dryRunAsks(units, noPods)
	if err != nil {
		return nil, nil, err
	}
	rc := rest.CopyConfig(c.Config)
	rc.QPS = dryRunRateTimes * c.Config.QPS
	rc.Burst = max(c.Config.Burst, int(rc.QPS))
	// What admission only warns of (a Pod Security warn level) is said again
	// when the run creates its objects.
	rc.WarningHandler = rest.NoWarnings{}
	dc, err := kubeclient.NewDynamic(rc)
	if err != nil {
		return nil, nil, err
	}
	errs := make([]error, len(asks))
	inParallel(len(asks), dryRunWorkers, func(i int) {
		a := asks[i]
		_, errs[i] = dc.Resource(a.gvr).Namespace(a.obj.GetNamespace()).Create(ctx, a.obj, metav1.CreateOptions{
			DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict",
		})
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}

	var refusals []Refusal
	limitRanges := map[string]string{}
	for i, a := range asks {
		err := errs[i]
		if err == nil || apierrors.IsAlreadyExists(err) {
			// An object already made is one a resumed run finds and follows,
			// or another run's, which the run refuses before it creates
			// anything (foreign).
			continue
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			return nil, nil, fmt.Errorf("dry-running the %s of step %s on the cluster at %s: %w", a.what, a.unit.Label, c.Host, err)
		}
		r, note := c.explain(ctx, a, status.Status(), limitRanges)
		if note != "" {
			if !slices.Contains(notes, note) {
				notes = append(notes, note)
			}
			continue
		}
		// A namespace that does not exist, say, refuses every object alike.
		if !slices.ContainsFunc(refusals, func(o Refusal) bool { return o.Label == r.Label && o.By == r.By && o.Message == r.Message }) {
			refusals = append(refusals, r)
		}
	}
	return refusals, notes, nil
}

// unitNamespaces returns the namespaces of units, in order.
func unitNamespaces(units []*unit) []string {
	var out []string
	for _, u := range units {
		if !slices.Contains(out, u.ns) {
			out = append(out, u.ns)
		}
	}
	return out
}

// dryRunAsks lists what to dry-run for units: each object, and each pod
// template as a Pod (but in the namespaces of noPods), one per shape.
func dryRunAsks(units []*unit, noPods map[string]bool) ([]ask, error) {
	var asks []ask
	byShape := map[string]int{}
	add := func(a ask) error {
		key, err := shape(a.obj)
		if err != nil {
			return err
		}
		key = a.gvr.String() + " " + key
		if i, ok := byShape[key]; ok {
			asks[i].shared++
			return nil
		}
		byShape[key] = len(asks)
		a.shared = 1
		asks = append(asks, a)
		return nil
	}
	for _, u := range units {
		if !u.owner() {
			continue
		}
		for _, o := range u.objects {
			if err := add(ask{gvr: o.gvr, obj: o.u, what: o.u.GetKind() + " " + o.u.GetName(), unit: u}); err != nil {
				return nil, err
			}
		}
		if noPods[u.ns] {
			continue
		}
		owner := u.objects[len(u.objects)-1].u
		for _, pod := range podsOf(owner) {
			if err := add(ask{gvr: podGVR, obj: pod, what: "pod of " + u.kind + " " + u.name, unit: u}); err != nil {
				return nil, err
			}
		}
	}
	return asks, nil
}

// podsOf wraps the pod templates of Job or JobSet owner as Pods, named as their
// controllers name them (generateName), in owner's namespace.
func podsOf(owner *unstructured.Unstructured) []*unstructured.Unstructured {
	var templates []map[string]any
	switch owner.GetKind() {
	case "Job":
		if t, ok, _ := unstructured.NestedMap(owner.Object, "spec", "template"); ok {
			templates = append(templates, t)
		}
	case "JobSet":
		rjs, _, _ := unstructured.NestedSlice(owner.Object, "spec", "replicatedJobs")
		for _, rj := range rjs {
			m, _ := rj.(map[string]any)
			if t, ok, _ := unstructured.NestedMap(m, "template", "spec", "template"); ok {
				templates = append(templates, t)
			}
		}
	}
	var pods []*unstructured.Unstructured
	for _, t := range templates {
		meta, _, _ := unstructured.NestedMap(t, "metadata")
		if meta == nil {
			meta = map[string]any{}
		}
		meta["generateName"] = owner.GetName() + "-"
		meta["namespace"] = owner.GetNamespace()
		delete(meta, "name")
		spec, _, _ := unstructured.NestedMap(t, "spec")
		pods = append(pods, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
		}})
	}
	return pods
}

// itemEnv are the variables whose values alone tell a foreach item's objects
// apart.
var itemEnv = []string{"MANIFOLD_ITEM", "MANIFOLD_INDEX"}

// shape is obj without what tells alike objects apart and admission does not
// judge: its names, a foreach item's index label, and the values of the item's
// variables. Two objects of one shape are asked once.
func shape(obj *unstructured.Unstructured) (string, error) {
	o := obj.DeepCopy()
	o.SetName("")
	o.SetGenerateName("")
	if l := o.GetLabels(); l != nil {
		delete(l, plan.LabelIndex)
		o.SetLabels(l)
	}
	data, err := json.Marshal(o.Object)
	if err != nil {
		return "", err
	}
	s := string(data)
	// Names recur inside (a Service's selector, a pod's subdomain, MASTER_ADDR).
	for _, name := range []string{obj.GetName(), strings.TrimSuffix(obj.GetGenerateName(), "-")} {
		if name != "" {
			s = strings.ReplaceAll(s, name, "\x00")
		}
	}
	return itemEnvRE().ReplaceAllString(s, `$1""`), nil
}

// lazyRegexp returns a regular expression compiled at its first use, not when
// a program starts: most runs of a flow program never dry-run anything.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// itemEnvRE matches the values of itemEnv in an object's JSON.
var itemEnvRE = lazyRegexp(`("name":"(?:` + strings.Join(itemEnv, "|") + `)","value":)"(?:[^"\\]|\\.)*"`)

var (
	podSecurityRE  = lazyRegexp(`violates PodSecurity "([a-z]+):[^"]*"`)
	webhookRE      = lazyRegexp(`admission webhook "([^"]+)" denied the request`)
	webhookCallRE  = lazyRegexp(`failed calling webhook "([^"]+)"`)
	webhookDryRE   = lazyRegexp(`admission webhook "([^"]+)" does not support dry run`)
	policyRE       = lazyRegexp(`ValidatingAdmissionPolicy '([^']+)'`)
	quotaRE        = lazyRegexp(`(exceeded|failed) quota: ([^,:]+)`)
	limitFieldRE   = lazyRegexp(`(?:maximum|minimum) (\S+) usage per \w+ is \S+?,? but (limit|request) is`)
	quotaSpecifyRE = lazyRegexp(`must specify ([a-z.]+)`)
	limitRE        = lazyRegexp(`(maximum|minimum) \S+ usage per (Container|Pod)|max limit to request ratio per (Container|Pod)`)
	forbiddenRE    = lazyRegexp(`^\S+ "[^"]*" is forbidden: `)
	hostNSRE       = lazyRegexp(`\b(host(?:Network|PID|IPC))=true`)
)

// podSecurityFields are the pod fields each Pod Security check judges.
var podSecurityFields = []struct{ check, field string }{
	{"privileged", "securityContext.privileged"},
	{"non-default capabilities", "securityContext.capabilities.add"},
	{"in securityContext.capabilities.add", "securityContext.capabilities.add"},         // restricted's, of a capability added
	{"must set securityContext.capabilities.drop", "securityContext.capabilities.drop"}, // restricted's, of one not dropped
	{"allowPrivilegeEscalation", "securityContext.allowPrivilegeEscalation"},
	{"runAsNonRoot", "securityContext.runAsNonRoot"},
	{"runAsUser=0", "securityContext.runAsUser"},
	{"seccompProfile", "securityContext.seccompProfile"},
	{"hostPath volumes", "spec.volumes"},
	{"restricted volume types", "spec.volumes"},
	{"hostPort", "ports[*].hostPort"},
}

// podSecurityTodo says what to do about a refusal by Pod Security's level,
// whose message is msg: what each option the level forbids is for, and which
// option or level lets the step run.
func podSecurityTodo(level, msg string) string {
	var todo []string
	privileged := false
	if strings.Contains(msg, "hostNetwork=true") {
		todo = append(todo, "sdk.HostNetwork puts the pod in the node's network, which only the privileged level allows")
		privileged = true
	}
	if strings.Contains(msg, "IPC_LOCK") {
		todo = append(todo, "sdk.EFAWiring adds the IPC_LOCK capability EFA needs, which only the privileged level allows")
		privileged = true
	}
	if level == "restricted" && strings.Contains(msg, "runAsNonRoot") {
		todo = append(todo, "the step's image may run as root: give the step a non-root user with sdk.RunAsUser(UID), or sdk.RunAsNonRoot(true) when its image already runs as one")
	}
	if len(todo) == 0 {
		todo = append(todo, "the pod sets what the "+level+" level forbids")
	}
	where := "run the step in a namespace at the baseline or privileged level (--namespace, sdk.Namespace), or ask its admins to lower the level"
	if privileged {
		where = "run the step in a namespace at the privileged level (--namespace, sdk.Namespace), ask its admins to lower the level, or leave the option out"
	} else if level == "restricted" && strings.Contains(msg, "runAsNonRoot") && len(todo) == 1 {
		return todo[0]
	}
	return strings.Join(todo, "; ") + ": " + where
}

// explain turns the API server's refusal st of ask a into a Refusal, or into a
// note when it does not refuse the object itself: a webhook that does not take
// dry runs, RBAC, a quota that has no room now but would hold the object.
// limitRanges caches the names of each namespace's LimitRanges.
func (c *cluster) explain(ctx context.Context, a ask, st metav1.Status, limitRanges map[string]string) (Refusal, string) {
	u := a.unit
	ns := a.obj.GetNamespace()
	msg := strings.ReplaceAll(forbiddenRE().ReplaceAllString(st.Message, ""), "\n", " ")
	r := Refusal{Step: u.Step.Name, Label: u.Label, Object: a.what, Message: msg}
	if a.shared > 1 && u.Step.Foreach != nil || u.fan != nil {
		r.Label = u.Step.Name // the step's items alike
	}
	fields := causeFields(st)
	switch {
	case webhookDryRE().MatchString(msg):
		return r, fmt.Sprintf("the admission webhook %s does not take dry runs (its sideEffects are not None or NoneOnDryRun): it answers only when the run creates its objects", webhookDryRE().FindStringSubmatch(msg)[1])
	case podSecurityRE().MatchString(msg):
		fields = podSecurity(&r, ns, msg, fields)
	case webhookRE().MatchString(msg):
		name := webhookRE().FindStringSubmatch(msg)[1]
		r.By = "the admission webhook " + name
		r.Todo = "change what the webhook objects to, or ask the cluster's admins about " + name
	case webhookCallRE().MatchString(msg):
		name := webhookCallRE().FindStringSubmatch(msg)[1]
		r.By = "the admission webhook " + name
		r.Message = "it could not be called: " + msg
		r.Todo = "the cluster would refuse the object the same way: ask the cluster's admins to fix the webhook " + name
	case policyRE().MatchString(msg):
		r.By = "the ValidatingAdmissionPolicy " + policyRE().FindStringSubmatch(msg)[1]
		r.Todo = "change what the policy objects to, or ask the cluster's admins about it"
	case strings.Contains(msg, "status unknown for quota"):
		return r, fmt.Sprintf("step %s: a ResourceQuota of namespace %s is not counted yet (%s); its controller counts it shortly", r.Label, ns, msg)
	case quotaRE().MatchString(msg):
		m := quotaRE().FindStringSubmatch(msg)
		r.By = "the ResourceQuota " + m[2] + " of namespace " + ns
		if m[1] == "exceeded" && quotaFits(msg) {
			return r, fmt.Sprintf("step %s: the ResourceQuota %s of namespace %s has no room for its %s now (%s); it waits for room once created", r.Label, m[2], ns, a.what, msg)
		}
		r.Todo = "ask less of it (sdk.CPU, sdk.Memory, --set), or ask the namespace's admins to raise the quota"
		if m := quotaSpecifyRE().FindStringSubmatch(msg); m != nil {
			fields = append(fields, "resources."+m[1])
			r.Todo = "the quota counts " + m[1] + ", which every pod must then state: give the step one (sdk.CPU, sdk.Memory, or the flow's default)"
		}
	case limitRE().MatchString(msg):
		r.By = c.limitRangeNames(ctx, ns, limitRanges)
		r.Todo = "ask what the LimitRange allows (sdk.CPU, sdk.Memory, --set), or ask the namespace's admins to change it"
		if m := limitFieldRE().FindStringSubmatch(msg); m != nil {
			fields = append(fields, "resources."+m[2]+"s."+m[1])
			option := map[string]string{"cpu": "cpu", "memory": "memory", "ephemeral-storage": "disk"}[m[1]]
			if option != "" {
				r.Todo = "ask what the LimitRange allows (--set " + u.Step.Name + "." + option + "=…), or ask the namespace's admins to change it"
			}
		}
	case apierrors.IsNotFound(&apierrors.StatusError{ErrStatus: st}) && st.Details != nil && st.Details.Kind == "namespaces":
		r.By = "the cluster at " + c.Host
		r.Todo = "create the namespace (`kubectl create namespace " + ns + "`), or pass --namespace"
		r.Message = "namespace " + ns + " does not exist"
	case apierrors.IsForbidden(&apierrors.StatusError{ErrStatus: st}) && strings.Contains(msg, "cannot create resource"):
		return r, fmt.Sprintf("the %s of step %s was not dry-run: %s", a.what, r.Label, msg)
	case apierrors.IsInvalid(&apierrors.StatusError{ErrStatus: st}):
		r.By = "the API server's validation"
		r.Todo = "fix the option behind the field it names"
	default:
		r.By = "the cluster at " + c.Host
		r.Todo = "fix what it names, or ask the cluster's admins"
	}
	r.Field = strings.Join(fields, ", ")
	return r, ""
}

// causeFields returns the fields the causes of refusal st name, each once, in
// order.
func causeFields(st metav1.Status) []string {
	var fields []string
	if st.Details != nil {
		for _, cause := range st.Details.Causes {
			if cause.Field != "" && !slices.Contains(fields, cause.Field) {
				fields = append(fields, cause.Field)
			}
		}
	}
	return fields
}

// podSecurity fills in Refusal r of Pod Security's refusal msg in namespace ns
// (podSecurityRE): the level that refuses, and what to do; it returns fields
// with the pod fields msg judges.
func podSecurity(r *Refusal, ns, msg string, fields []string) []string {
	level := podSecurityRE().FindStringSubmatch(msg)[1]
	r.By = "pod-security.kubernetes.io/enforce=" + level + " of namespace " + ns
	for _, m := range hostNSRE().FindAllStringSubmatch(msg, -1) {
		fields = append(fields, "spec."+m[1])
	}
	for _, f := range podSecurityFields {
		if strings.Contains(msg, f.check) && !slices.Contains(fields, f.field) {
			fields = append(fields, f.field)
		}
	}
	r.Todo = podSecurityTodo(level, msg)
	return fields
}

// quotaFits reports whether an exceeded-quota message ("exceeded quota: q,
// requested: cpu=2, used: cpu=1, limited: cpu=2") asks no more of any resource
// than the quota holds when empty: the object is refused now for what others
// use, and fits once they are done.
func quotaFits(msg string) bool {
	list := func(key string) map[string]resource.Quantity {
		out := map[string]resource.Quantity{}
		_, rest, ok := strings.Cut(msg, key+": ")
		if !ok {
			return out
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok || strings.Contains(k, ":") { // the next list ("used: …")
				break
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				break
			}
			out[k] = q
		}
		return out
	}
	requested, limited := list("requested"), list("limited")
	if len(requested) == 0 {
		return false
	}
	for k, q := range requested {
		if l, ok := limited[k]; ok && q.Cmp(l) > 0 {
			return false
		}
	}
	return true
}

// limitRangeNames names the LimitRanges of namespace ns ("the LimitRange
// limits of namespace ns"), or says "a LimitRange" when this user may not list
// them; cache holds the answers.
func (c *cluster) limitRangeNames(ctx context.Context, ns string, cache map[string]string) string {
	if by, ok := cache[ns]; ok {
		return by
	}
	by := "a LimitRange of namespace " + ns
	if list, err := c.Client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{}); err == nil && len(list.Items) > 0 {
		var names []string
		for _, l := range list.Items {
			names = append(names, l.Name)
		}
		noun := "the LimitRange "
		if len(names) > 1 {
			noun = "the LimitRanges "
		}
		by = noun + strings.Join(names, ", ") + " of namespace " + ns
	}
	cache[ns] = by
	return by
}
