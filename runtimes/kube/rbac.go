package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/emit/encode"
	"github.com/manifoldflow/manifold/placement"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runid"
	rcluster "github.com/manifoldflow/manifold/runtimes/cluster"
)

// Need is one thing a run does on the cluster, as the RBAC rule that lets it: one
// resource and the verbs of one use of it. Needs is the one list of them: the
// preflight of run --kube asks the API server about each before anything is
// created, and `check --rbac` prints them as the Role (and ClusterRole) a user
// needs.
type Need struct {
	// Rule grants the need: one resource, and the verbs one use of it takes.
	Rule rbacv1.PolicyRule
	// Why says what the run does with it.
	Why string
	// Without, for a need the run can do without, says what it then does not
	// do: the preflight notes it instead of refusing the run. "" for a need the
	// run cannot do without.
	Without string
	// Cluster is set for a cluster-scoped resource, which only a ClusterRole
	// grants. Every cluster-scoped need is one the run can do without.
	Cluster bool
}

// What names the need's resource as RBAC does: resource[/subresource][.group].
func (n Need) What() string {
	w := strings.Join(n.Rule.Resources, ",")
	if g := n.Rule.APIGroups[0]; g != "" {
		w += "." + g
	}
	return w
}

// String names the verbs and the resource, and why: "create jobs.batch (to
// create each step's Job)".
func (n Need) String() string {
	return strings.Join(n.Rule.Verbs, ", ") + " " + n.What() + " (to " + n.Why + ")"
}

// need is a Need on resource of group with verbs.
func need(group, resource string, verbs []string, why string) Need {
	return Need{Rule: rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: verbs}, Why: why}
}

func (n Need) without(what string) Need { n.Without = what; return n }

func (n Need) cluster(what string) Need { n.Cluster, n.Without = true, what; return n }

// podDryRun is the need of the dry run (dryrun.go dryRun) of each step's pod as
// a Pod.
var podDryRun = need("", "pods", []string{"create"}, "dry-run each step's pod (dryRun=All; nothing is created)").
	without("the steps' pods are not dry-run, so Pod Security, LimitRanges and webhooks on pods answer only once the Jobs make them")

// podCleanup is the need of the cleanup's deleting the run's pods itself
// (cleanup.go cleanup), after their Jobs: one request that the API server
// carries out at once, where the garbage collector deletes pods one request
// at a time, at the controller manager's client limit (20 a second, stock).
var podCleanup = need("", "pods", []string{"deletecollection"}, "delete the run's pods at once when it ends, after their Jobs").
	without("the run's end waits for the garbage collector to delete its pods, one at a time")

// runShape is what of a run decides what it needs of RBAC.
type runShape struct {
	// kinds are the resources the run creates (createdKinds).
	kinds []schema.GroupVersionResource
	// placement is whether the run checks its steps' placement on the nodes
	// first (not NoCheck), devices whether that check reads DRA devices.
	placement, devices bool
	// queued, priority, volumes and templates are whether some step waits in a
	// Kueue queue, asks for a priority, mounts a claim, or claims from an
	// installed ResourceClaimTemplate.
	queued, priority, volumes, templates bool
}

// shapeOf is the runShape of a run of f (with check unless noCheck) that creates
// units.
func shapeOf(f *plan.Flow, units []*unit, noCheck bool) runShape {
	var later []schema.GroupVersionResource
	if f.Dynamic() != nil {
		// A fan-out over a value found at run time makes its Jobs, or its
		// Indexed Job and ConfigMap, then (runner.made).
		later = []schema.GroupVersionResource{jobGVR, configMapGVR}
	}
	sh := runShape{kinds: createdKinds(units, later...), placement: !noCheck, devices: !noCheck && placement.NeedsDevices(f)}
	for _, s := range f.Steps {
		sh.queued = sh.queued || s.Queue != ""
		sh.priority = sh.priority || s.Priority != ""
		sh.volumes = sh.volumes || len(s.Volumes) > 0
		sh.templates = sh.templates || s.DRA != nil && len(s.DRA.Templates) > 0
	}
	return sh
}

// createdKinds are the resources units create, and those of also, the Jobs or
// JobSets first: what the run watches and, when it ends, deletes by its label.
func createdKinds(units []*unit, also ...schema.GroupVersionResource) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, gvr := range []schema.GroupVersionResource{jobSetGVR, jobGVR, serviceGVR, configMapGVR, resourceClaimTemplateGVR} {
		if slices.Contains(also, gvr) || slices.ContainsFunc(units, func(u *unit) bool {
			return slices.ContainsFunc(u.objects, func(o object) bool { return o.gvr == gvr })
		}) {
			out = append(out, gvr)
		}
	}
	return out
}

// needs is every Need of a run of shape sh, in the order the Role lists them.
// Each is a call the runtime makes: keep them in step with the code that makes
// it (named in the comments).
func needs(sh runShape) []Need {
	as := AsJob
	if slices.Contains(sh.kinds, jobSetGVR) {
		as = AsJobSet
	}
	var out []Need
	for _, gvr := range sh.kinds {
		out = append(out, kindNeeds(gvr, as)...)
	}
	out = append(out,
		// watch.go: the pods' informer.
		need("", "pods", []string{"list", "watch"}, "follow the steps' pods: their progress, nodes, exit codes and why they wait"),
		// runtimes/cluster logfollow.go: streamed, and the tail of a failed pod's.
		need("", "pods/log", []string{"get"}, "stream the steps' output"),
		// loop.go warning.
		need("", "events", []string{"list"}, "say why a step's "+kindOf(as)+" makes no pods (a quota, a webhook)"),
		podDryRun,
		podCleanup,
		// dryrun.go limitRangeNames.
		need("", "limitranges", []string{"list"}, "name the LimitRange that refuses a step's pod").
			without("a step a LimitRange refuses is told \"a LimitRange\" without its name"),
	)
	if sh.volumes {
		// connect.go claimsExist.
		out = append(out, need("", "persistentvolumeclaims", []string{"get"}, "check that each claim a step mounts exists").
			without("a step whose claim is missing waits for it, Pending, instead of being refused"))
	}
	if sh.templates {
		// checkdra.go missingTemplates.
		out = append(out, need(resourceClaimTemplateGVR.Group, resourceClaimTemplateGVR.Resource, []string{"get"}, "check that each installed ResourceClaimTemplate a step claims from (sdk.Claim) exists").
			without("a step whose template is missing is never scheduled, instead of being refused"))
	}
	if sh.queued {
		// watch.go: the Workloads' informer.
		out = append(out, need(workloadGVR.Group, workloadGVR.Resource, []string{"list", "watch"}, "say why a queued step waits for Kueue to admit it"))
		// queue.go queueProblem.
		out = append(out, need(localQueueGVR.Group, localQueueGVR.Resource, []string{"get"}, "check that each step's LocalQueue exists").
			without("a step whose LocalQueue is missing waits for ever, instead of being refused"))
	}
	return append(out, clusterNeeds(sh)...)
}

// kindNeeds is every Need of the objects of kind gvr that a run creates, its
// steps running as as.
func kindNeeds(gvr schema.GroupVersionResource, as string) []Need {
	var out []Need
	one, follow := "each step's "+kindOf(as), "follow each step's "+kindOf(as)+" as it runs"
	switch gvr {
	case serviceGVR:
		// The watcher keeps Services only to see them gone.
		one, follow = "the headless Service of each multi-node step", "see the run's Services gone before it ends"
	case resourceClaimTemplateGVR:
		one = "the ResourceClaimTemplate of each step with DRA devices"
	case configMapGVR:
		one = "the ConfigMap of the items of each foreach step"
	}
	// loop.go create, and the dry run (dryrun.go) of the same object.
	out = append(out, need(gvr.Group, gvr.Resource, []string{"create"}, "create "+one+", and dry-run it first"))
	if gvr == configMapGVR {
		// own.go foreign, existing: the ConfigMaps are listed, not watched.
		out = append(out, need(gvr.Group, gvr.Resource, []string{"list"}, "check that the run's ConfigMaps are its own"))
	} else if gvr != resourceClaimTemplateGVR {
		// watch.go: the informers that drive the run.
		out = append(out, need(gvr.Group, gvr.Resource, []string{"list", "watch"}, follow))
	}
	// cleanup.go deleteUnit: a unit that failed before a resume, or whose
	// pods cannot be scheduled.
	out = append(out, need(gvr.Group, gvr.Resource, []string{"delete"}, "delete "+one+" when the step must run again after a resume, or cannot be scheduled"))
	// cleanup.go cleanup: everything labelled with the run.
	out = append(out, need(gvr.Group, gvr.Resource, []string{"deletecollection"}, "delete the run's "+gvr.Resource+" by its label when it ends"))
	return out
}

// clusterNeeds is every cluster-scoped Need of a run of shape sh.
func clusterNeeds(sh runShape) []Need {
	var out []Need
	// Cluster-scoped reads; a ClusterRole grants them. The run does without
	// each, with a note.
	// connect.go preflight.
	out = append(out, need("", "namespaces", []string{"get"}, "check that the run's namespaces exist").
		cluster("a missing namespace is told by the dry run instead"))
	if sh.placement {
		// check.go check.
		out = append(out, need("", "nodes", []string{"list"}, "check that the cluster's nodes can take every step").
			cluster("placement not checked: a step no node can take stays Pending"))
	}
	if sh.devices {
		// checkdra.go inventory.
		for _, r := range []string{"deviceclasses", "resourceslices"} {
			out = append(out, need(resourceClaimTemplateGVR.Group, r, []string{"list"}, "check that the nodes have the DRA devices the steps ask for").
				cluster("placement not checked: DRA devices unknown"))
		}
	}
	if sh.priority {
		// queue.go queueProblem.
		out = append(out, need("scheduling.k8s.io", "priorityclasses", []string{"get"}, "check that each step's PriorityClass exists").
			cluster("a step whose PriorityClass is missing is refused only when its pods are made"))
	}
	if sh.queued {
		// queue.go clusterQueueProblem.
		out = append(out, need(clusterQueueGVR.Group, clusterQueueGVR.Resource, []string{"get"}, "check that each step's ClusterQueue exists and is active").
			cluster("a step whose ClusterQueue is missing or inactive waits for ever, instead of being refused"))
		if sh.priority {
			out = append(out, need(workloadPriorityClassGVR.Group, workloadPriorityClassGVR.Resource, []string{"get"}, "check that each queued step's WorkloadPriorityClass exists").
				cluster("a queued step whose WorkloadPriorityClass is missing is not taken by Kueue, instead of being refused"))
		}
	}
	return out
}

// Needs is every Need of a run of f with o (o.NoCheck, o.As, o.Namespace), and
// the namespaces they are needed in: those steps name, and o.Namespace for the
// rest (else the kubeconfig context's, else "default"). It asks no cluster.
func Needs(f *plan.Flow, o Options) ([]Need, []string, error) {
	as, err := kindAs(o.As)
	if err != nil {
		return nil, nil, err
	}
	ns := o.Namespace
	if ns == "" {
		ns = "default"
		// Without a kubeconfig, the Role is for the default namespace.
		if n, err := rcluster.ContextNamespace(o.Kubeconfig, o.Context); err == nil && n != "" {
			ns = n
		}
	}
	rp := *f
	rp.Run, rp.Schedule = runid.New(time.Now()), ""
	units, errs := plan2units(&rp, as, ns)
	if len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	return needs(shapeOf(f, units, o.NoCheck)), unitNamespaces(units), nil
}

// RBAC returns, as YAML that `kubectl apply -f` takes, the Role a user needs in
// each namespace of a run of f with o (o.Namespace, or "default", for steps
// without a namespace of their own), named manifold-<flow>, then the
// ClusterRole of the cluster-scoped reads the run does without when it must.
// Each rule has a comment saying why the run needs it.
func RBAC(f *plan.Flow, o Options) ([]byte, error) {
	all, namespaces, err := Needs(f, o)
	if err != nil {
		return nil, err
	}
	as, _ := kindAs(o.As)
	name := "manifold-" + f.Name
	var b strings.Builder
	fmt.Fprintf(&b, "# What `run --kube --as %s` of flow %s needs of RBAC (`check --rbac` prints it).\n", as, f.Name)
	fmt.Fprintf(&b, "# Bind the Role in each namespace:\n#   kubectl create rolebinding %s --role %s --user USER -n NAMESPACE\n", name, name)
	fmt.Fprintf(&b, "# The ClusterRole is optional: without it the run skips the checks it grants, with a note.\n")
	fmt.Fprintf(&b, "#   kubectl create clusterrolebinding %s --clusterrole %s --user USER\n", name, name)
	write := func(kind, ns string, cluster bool) error {
		head, err := encode.YAML("", map[string]any{
			"apiVersion": rbacv1.SchemeGroupVersion.String(), "kind": kind,
			"metadata": metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{plan.LabelFlow: f.Name}},
		})
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(head)
		b.WriteString("rules:\n")
		for _, n := range all {
			if n.Cluster != cluster {
				continue
			}
			b.WriteString("  # to " + n.Why)
			if n.Without != "" {
				b.WriteString("; without it, " + n.Without)
			}
			// One rule a line, in YAML's flow style (its lists are JSON's).
			fmt.Fprintf(&b, "\n  - {apiGroups: %s, resources: %s, verbs: %s}\n", flowList(n.Rule.APIGroups), flowList(n.Rule.Resources), flowList(n.Rule.Verbs))
		}
		return nil
	}
	for _, ns := range namespaces {
		if err := write("Role", ns, false); err != nil {
			return nil, err
		}
	}
	if err := write("ClusterRole", "", true); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// refusedNeeds asks the API server, for each namespace, whether this user may do
// what every need asks (a cluster-scoped need once), and returns those it may
// not, with the namespace each was asked in ("" for a cluster-scoped need).
func (c *cluster) refusedNeeds(ctx context.Context, namespaces []string, all []Need) ([]refused, error) {
	var out []refused
	ask := func(ns string, n Need) error {
		for _, res := range n.Rule.Resources {
			resource, sub, _ := strings.Cut(res, "/")
			for _, verb := range n.Rule.Verbs {
				ok, err := c.allowed(ctx, ns, access{verb, n.Rule.APIGroups[0], resource, sub})
				if err != nil {
					return err
				}
				if !ok {
					out = append(out, refused{ns: ns, verb: verb, need: n})
				}
			}
		}
		return nil
	}
	for _, n := range all {
		if n.Cluster {
			if err := ask("", n); err != nil {
				return nil, err
			}
			continue
		}
		for _, ns := range namespaces {
			if err := ask(ns, n); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// refused is a verb of a need this user may not do in namespace ns ("" for a
// cluster-scoped need).
type refused struct {
	ns   string
	verb string
	need Need
}

// line says what is refused and why the run needs it.
func (r refused) line() string {
	where := "in namespace " + r.ns
	if r.ns == "" {
		where = "on the cluster"
	}
	return r.verb + " " + r.need.What() + " " + where + " (to " + r.need.Why + ")"
}

// note says, for a need the run does without, what it then does not do.
func (r refused) note() string {
	return "this user may not " + r.line() + ": " + r.need.Without
}

// flowList is list in YAML's flow style, every item quoted: ["", "pods"].
func flowList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
