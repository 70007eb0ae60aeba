// Package placement decides, from a cluster's Nodes and what its DRA drivers
// publish (DeviceClasses and ResourceSlices), whether and where each step of a
// compiled flow can be placed: which nodes pass the step's node selector and
// tolerations and advertise enough of what it asks for, and whether enough of
// them do, as its placement terms ask. It only computes over the objects it is
// handed; reading them from a cluster is its callers' work (runtimes/kube).
package placement

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/plan"
)

// Placement says whether the nodes of a cluster can run a step.
type Placement struct {
	Step string `json:"step"`
	// Nodes is how many distinct nodes the step needs at once.
	Nodes int `json:"nodes"`
	// Fit names the nodes that pass the step's selector and tolerations and
	// advertise enough allocatable of everything it asks for.
	Fit []string `json:"fit"`
	// EFA is the EFA interfaces per node the step asks for: for sdk.EFAAll, the
	// count every node it targets advertises (or, when the step claims them
	// through DRA, publishes in its ResourceSlices).
	EFA int  `json:"efa,omitempty"`
	OK  bool `json:"ok"`
	// Reason says why the step cannot be placed.
	Reason string `json:"reason,omitempty"`
}

// Report is where the steps of a flow can be placed (Plan).
type Report struct {
	Cluster string `json:"cluster"`
	Context string `json:"context"`
	// NodeCount is how many nodes the cluster has.
	NodeCount int         `json:"nodeCount"`
	Steps     []Placement `json:"steps"`
	// OK is set when every step can be placed.
	OK bool `json:"ok"`
	// Notes are what the check could not ask (such as the dry run of pods this
	// user may not create), one line each.
	Notes []string `json:"notes,omitempty"`
}

// Unplaceable returns the placements of the steps that cannot be placed.
func (r *Report) Unplaceable() []Placement {
	var out []Placement
	for _, p := range r.Steps {
		if !p.OK {
			out = append(out, p)
		}
	}
	return out
}

// Refuse marks step i of r as one that cannot run, for why (after the reason it
// has already): for what the cluster lacks beyond its nodes and devices, such as
// a ResourceClaimTemplate or a queue.
func (r *Report) Refuse(i int, why string) {
	p := &r.Steps[i]
	if p.Reason != "" {
		why = p.Reason + "; and " + why
	}
	p.OK, p.Reason, r.OK = false, why, false
}

// Plan checks every step of f against nodes and, for DRA steps, the devices of
// their ResourceSlices (inv; nil stands for none, which is enough when no step
// has DRA devices of its own, NeedsDevices). host and context name the cluster
// in the report. A step no node (or, for a multi-node step, too few nodes) can
// take would stay Pending for ever, and is reported with the reason. The EFA
// interfaces the nodes a step targets advertise must be the same on all of them;
// a mixed or partial rollout fails closed.
func Plan(f *plan.Flow, nodes []corev1.Node, inv *Inventory, host, context string) *Report {
	if inv == nil {
		inv = &Inventory{}
	}
	r := &Report{Cluster: host, Context: context, NodeCount: len(nodes), OK: true}
	for i := range f.Steps {
		p := placeStep(f, &f.Steps[i], nodes, inv)
		r.OK = r.OK && p.OK
		r.Steps = append(r.Steps, p)
	}
	return r
}

// placeStep checks step s against nodes and inv.
func placeStep(f *plan.Flow, s *plan.Step, nodes []corev1.Node, inv *Inventory) Placement {
	p := Placement{Step: s.Name, Nodes: s.Nodes, EFA: s.EFA, Fit: []string{}}
	tpl := emit.Pod(f, s, emit.PodOptions{})
	pod := &corev1.Pod{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}
	requests := pod.Spec.Containers[0].Resources.Requests
	targeted, why := targets(pod, nodes)

	claimed := s.DRA != nil && len(s.DRA.Requests) > 0
	if claimed {
		if missing := inv.missingClasses(s); len(missing) > 0 {
			p.Reason = fmt.Sprintf("it claims devices of DeviceClass %s, which the cluster does not have: install the DRA driver that provides it, or name the cluster's class in manifold.toml's [device_classes]", strings.Join(missing, ", "))
			return p
		}
	}
	s, ok := claimedEFA(&p, s, targeted, inv)
	if !ok {
		return p
	}
	if s.EFA > 0 && !claimed {
		if requests, ok = advertisedEFA(&p, s, targeted, requests); !ok {
			return p
		}
	}

	for _, n := range targeted {
		if short := lacks(requests, n); short != "" {
			why[short] = append(why[short], n.Name)
			continue
		}
		if claimed {
			if short := inv.lacks(s, n); short != "" {
				why[short] = append(why[short], n.Name)
				continue
			}
		}
		p.Fit = append(p.Fit, n.Name)
	}
	p.OK = len(p.Fit) >= s.Nodes
	if p.OK {
		if reason := spreadTogether(s, nodes, p.Fit); reason != "" {
			p.OK, p.Reason = false, reason
		}
		return p
	}
	p.Reason = pending(s, p.Fit, len(nodes), why)
	return p
}

// targets returns the nodes pod targets, those its selector and tolerations
// admit, and why each other node does not: reason → node names.
func targets(pod *corev1.Pod, nodes []corev1.Node) (targeted []*corev1.Node, why map[string][]string) {
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	why = map[string][]string{}
	for i := range nodes {
		n := &nodes[i]
		switch reason := admits(pod, affinity, n); {
		case reason != "":
			why[reason] = append(why[reason], n.Name)
		default:
			targeted = append(targeted, n)
		}
	}
	return targeted, why
}

// claimedEFA resolves the EFA count of a step that claims every EFA interface
// through DRA (sdk.EFAAll): as many as its targeted nodes' ResourceSlices
// publish, which must be the same on every node it targets, as the device
// plugin's count must. It returns the step with that count in its claim, or
// false with p.Reason saying why the step cannot be placed. Any other step it
// returns as it is.
func claimedEFA(p *Placement, s *plan.Step, targeted []*corev1.Node, inv *Inventory) (*plan.Step, bool) {
	class, ok := efaClass(s)
	if !ok || !s.EFAAll {
		return s, true
	}
	counts := map[int][]string{}
	for _, n := range targeted {
		v := inv.devices(n.Name, class)
		counts[v] = append(counts[v], n.Name)
	}
	if len(counts) > 1 {
		p.Reason = fmt.Sprintf("the %d nodes it targets publish different numbers of EFA interfaces of DeviceClass %s in their ResourceSlices (%s): a partial or mixed rollout of the EFA DRA driver; fix those nodes, or narrow the step's node selector to nodes that agree",
			len(targeted), class, byCount(counts))
		return s, false
	}
	for v := range counts {
		if v == 0 {
			p.Reason = fmt.Sprintf("sdk.EFAAll(): %s no EFA interfaces of DeviceClass %s in ResourceSlices; is the EFA DRA driver running?", theNodes(len(targeted), "publishes", "publish"), class)
			return s, false
		}
		resolved, ok := withEFA(s, v)
		if !ok {
			p.Reason = fmt.Sprintf("sdk.EFAAll(): the nodes it targets publish %d EFA interfaces, which the %d groups of its claim cannot share evenly; ask a count with sdk.EFA(n)", v, len(s.DRA.Constraints))
			return s, false
		}
		p.EFA, s = v, &resolved
	}
	return s, true
}

// advertisedEFA checks that every node a step with EFA (not claimed through
// DRA) targets advertises the same EFA count, and for sdk.EFAAll returns the
// pod's requests asking that count. It returns false with p.Reason saying why
// the step cannot be placed.
func advertisedEFA(p *Placement, s *plan.Step, targeted []*corev1.Node, requests corev1.ResourceList) (corev1.ResourceList, bool) {
	counts := map[int64][]string{}
	for _, n := range targeted {
		q := n.Status.Allocatable[plan.ResourceEFA]
		counts[q.Value()] = append(counts[q.Value()], n.Name)
	}
	if len(counts) > 1 {
		p.Reason = fmt.Sprintf("the %d nodes it targets advertise different numbers of EFA interfaces (%s): a partial or mixed rollout of the EFA device plugin; fix those nodes, or narrow the step's node selector to nodes that agree",
			len(targeted), byCount(counts))
		return requests, false
	}
	if s.EFAAll && len(counts) == 1 {
		for v := range counts {
			if v == 0 {
				p.Reason = fmt.Sprintf("sdk.EFAAll(): %s no %s; is the EFA device plugin running?", theNodes(len(targeted), "advertises", "advertise"), plan.ResourceEFA)
				return requests, false
			}
			p.EFA = int(v)
			requests = requests.DeepCopy()
			requests[plan.ResourceEFA] = *resourceQuantity(v)
		}
	}
	return requests, true
}

// pending says why step s, which fits only the nodes fit of all nodes, would
// not run: how many nodes lack what, from why (reason → node names), most
// first.
func pending(s *plan.Step, fit []string, all int, why map[string][]string) string {
	var parts []string
	for _, reason := range slices.Sorted(maps.Keys(why)) {
		parts = append(parts, fmt.Sprintf("%d %s", len(why[reason]), reason))
	}
	sort.SliceStable(parts, func(i, j int) bool { return leadingInt(parts[i]) > leadingInt(parts[j]) })
	summary := fmt.Sprintf("%d/%d nodes can take its pod", len(fit), all)
	if len(parts) > 0 {
		summary += ": " + strings.Join(parts, ", ")
	}
	if s.Nodes > 1 && len(fit) > 0 {
		return fmt.Sprintf("it runs on %d nodes at once, and %s", s.Nodes, summary)
	}
	return "it would stay Pending: " + summary
}

// admits says why node n does not admit pod (its node selector or affinity, an
// untolerated taint, a node that is cordoned or not ready), or "".
func admits(pod *corev1.Pod, affinity nodeaffinity.RequiredNodeAffinity, n *corev1.Node) string {
	if ok, _ := affinity.Match(n); !ok {
		var sel []string
		for _, k := range slices.Sorted(maps.Keys(pod.Spec.NodeSelector)) {
			sel = append(sel, k+"="+pod.Spec.NodeSelector[k])
		}
		return "do not match its node selector " + strings.Join(sel, ",")
	}
	if n.Spec.Unschedulable {
		return "are cordoned"
	}
	ready := false
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return "are not Ready"
	}
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if t, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, pod.Spec.Tolerations, noSchedule, false); untolerated {
		return "have a taint it does not tolerate (" + t.ToString() + ")"
	}
	return ""
}

// lacks names the first resource of requests that node n does not advertise enough
// of, or "".
func lacks(requests corev1.ResourceList, n *corev1.Node) string {
	for _, name := range slices.Sorted(maps.Keys(requests)) {
		want := requests[name]
		have, ok := n.Status.Allocatable[name]
		if !ok || have.Cmp(want) < 0 {
			shown := "0"
			if ok {
				shown = have.String()
			}
			return fmt.Sprintf("have too little %s (%s allocatable, %s asked)", name, shown, want.String())
		}
	}
	return ""
}

func leadingInt(s string) int {
	n, _ := strconv.Atoi(strings.Fields(s)[0])
	return n
}

func resourceQuantity(n int64) *resource.Quantity {
	return resource.NewQuantity(n, resource.DecimalSI)
}

// theNodes is the subject "the node it targets" or "the n nodes it targets" with
// its verb, in the form one or several take.
func theNodes(n int, one, several string) string {
	if n == 1 {
		return "the node it targets " + one
	}
	return fmt.Sprintf("the %d nodes it targets %s", n, several)
}

// byCount lists nodes by a count they have: "4 on b; 8 on a, c".
func byCount[N int | int64](counts map[N][]string) string {
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d on %s", v, strings.Join(counts[v], ", ")))
	}
	return strings.Join(parts, "; ")
}

// efaClass returns the DeviceClass of the EFA interfaces step s claims through
// DRA, and whether it claims any.
func efaClass(s *plan.Step) (string, bool) {
	if s.DRA == nil {
		return "", false
	}
	for _, r := range s.DRA.Requests {
		if isEFARequest(r) {
			return r.Class, true
		}
	}
	return "", false
}

// isEFARequest reports whether r is a claim's request for EFA interfaces: efa, or
// efa-<i> of a pair with GPUs.
func isEFARequest(r plan.DeviceRequest) bool {
	return r.Name == plan.DeviceRequestEFA || strings.HasPrefix(r.Name, plan.DeviceRequestEFA+"-")
}

// withEFA returns s asking efa EFA interfaces instead of its own count: in its
// requests and limits, or in its claim, whose requests of EFA interfaces share
// them as they shared the count s asks. It reports false when they cannot share
// efa evenly.
func withEFA(s *plan.Step, efa int) (plan.Step, bool) {
	out := *s
	out.EFA = efa
	v := strconv.Itoa(efa)
	out.Requests, out.Limits = setQuantity(s.Requests, plan.ResourceEFA, v), setQuantity(s.Limits, plan.ResourceEFA, v)
	if s.DRA == nil || s.EFA == 0 {
		return out, true
	}
	d := *s.DRA
	d.Requests = slices.Clone(s.DRA.Requests)
	for i, r := range d.Requests {
		if !isEFARequest(r) {
			continue
		}
		if r.Count*efa%s.EFA != 0 || r.Count*efa < s.EFA {
			return out, false
		}
		d.Requests[i].Count = r.Count * efa / s.EFA
	}
	out.DRA = &d
	return out, true
}

// Resolve returns f with the EFA count of each sdk.EFAAll step replaced by the one
// the cluster's nodes advertise, or with DRA publish in their ResourceSlices (r's,
// which Plan made of f), and notes saying which changed. f is not changed.
func Resolve(f *plan.Flow, r *Report) (*plan.Flow, []string) {
	out := *f
	out.Steps = slices.Clone(f.Steps)
	var notes []string
	for i := range out.Steps {
		s := &out.Steps[i]
		p := r.Steps[i]
		if !s.EFAAll || p.EFA == 0 || p.EFA == s.EFA {
			continue
		}
		resolved, ok := withEFA(s, p.EFA)
		if !ok {
			continue // Plan refused the step
		}
		notes = append(notes, fmt.Sprintf("%s: sdk.EFAAll() asks the %d EFA interfaces the cluster's %s nodes advertise (the catalog says %d)", s.Name, p.EFA, s.InstanceType, s.EFA))
		*s = resolved
	}
	return &out, notes
}

func setQuantity(qs []plan.Quantity, name, value string) []plan.Quantity {
	qs = slices.Clone(qs)
	for i := range qs {
		if qs[i].Name == name {
			qs[i].Value = value
		}
	}
	return qs
}
