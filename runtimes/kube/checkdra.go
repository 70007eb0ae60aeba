package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/manifoldflow/manifold/plan"
)

// resourceClaimTemplateGVR is the resource of the ResourceClaimTemplates a run
// creates for its sdk.DRA steps.
var resourceClaimTemplateGVR = schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}

// devices is what the cluster's DRA drivers publish: its DeviceClasses, and per
// node the devices of its ResourceSlices, each with the classes whose selectors
// accept it.
type devices struct {
	classes map[string]bool
	// byNode holds each node's devices.
	byNode map[string][]device
}

// device is one device of a ResourceSlice.
type device struct {
	name       string
	classes    map[string]bool
	attributes map[resourcev1.QualifiedName]resourcev1.DeviceAttribute
	driver     string
}

// attribute returns the value of the fully qualified attribute name of d, as
// text, and whether d has it. An attribute named without a domain is the
// driver's.
func (d device) attribute(name string) (string, bool) {
	domain, id, _ := strings.Cut(name, "/")
	for k, v := range d.attributes {
		kd, kid, ok := strings.Cut(string(k), "/")
		if !ok {
			kd, kid = d.driver, string(k)
		}
		if kd == domain && kid == id {
			switch {
			case v.StringValue != nil:
				return *v.StringValue, true
			case v.IntValue != nil:
				return fmt.Sprint(*v.IntValue), true
			case v.BoolValue != nil:
				return fmt.Sprint(*v.BoolValue), true
			case v.VersionValue != nil:
				return *v.VersionValue, true
			}
		}
	}
	return "", false
}

// errDRAForbidden is what inventory returns, wrapped, when RBAC refuses to list
// DeviceClasses or ResourceSlices.
var errDRAForbidden = errors.New("DRA objects forbidden")

// needsDevices reports whether some step of f has DRA devices of its own.
func needsDevices(f *plan.Flow) bool {
	return slices.ContainsFunc(f.Steps, func(s plan.Step) bool { return s.DRA != nil && len(s.DRA.Requests) > 0 })
}

// inventory lists the cluster's DeviceClasses and ResourceSlices, and finds which
// classes each device belongs to by the classes' own CEL selectors, as the
// scheduler does.
func (c *cluster) inventory(ctx context.Context) (*devices, error) {
	forbidden := func(what string) error {
		return fmt.Errorf("%w: RBAC on the cluster at %s (context %s) does not let this user list %s, which checking where DRA steps can run needs: ask a cluster admin for a ClusterRole granting list on deviceclasses and resourceslices (resource.k8s.io)", errDRAForbidden, c.host, c.context, what)
	}
	classes, err := c.client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, forbidden("deviceclasses")
	case apierrors.IsNotFound(err):
		classes = &resourcev1.DeviceClassList{} // no resource.k8s.io/v1: no classes
	case err != nil:
		return nil, fmt.Errorf("listing the DeviceClasses of the cluster at %s: %w", c.host, err)
	}
	slices, err := c.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return nil, forbidden("resourceslices")
	case apierrors.IsNotFound(err):
		slices = &resourcev1.ResourceSliceList{}
	case err != nil:
		return nil, fmt.Errorf("listing the ResourceSlices of the cluster at %s: %w", c.host, err)
	}
	return sortDevices(classes.Items, slices.Items)
}

// sortDevices assigns the devices of slices to their nodes and classes.
func sortDevices(classes []resourcev1.DeviceClass, slices []resourcev1.ResourceSlice) (*devices, error) {
	out := &devices{classes: map[string]bool{}, byNode: map[string][]device{}}
	drivers := map[string][]string{} // driver → classes
	for _, class := range classes {
		out.classes[class.Name] = true
		if d := classDriver(&class); d != "" {
			drivers[d] = append(drivers[d], class.Name)
		}
	}
	for _, sl := range slices {
		if sl.Spec.NodeName == nil || *sl.Spec.NodeName == "" {
			continue // devices of several nodes, or none: not what a claim's pod lands beside
		}
		for _, d := range sl.Spec.Devices {
			dev := device{name: d.Name, classes: map[string]bool{}, attributes: d.Attributes, driver: sl.Spec.Driver}
			for _, class := range drivers[sl.Spec.Driver] {
				dev.classes[class] = true
			}
			out.byNode[*sl.Spec.NodeName] = append(out.byNode[*sl.Spec.NodeName], dev)
		}
	}
	return out, nil
}

// driverSelector is the CEL selector by which the Neuron, EFA and NVIDIA DRA
// drivers' DeviceClasses select their devices: device.driver == "<driver>".
var driverSelector = regexp.MustCompile(`^\s*device\.driver\s*==\s*["']([^"']+)["']\s*$`)

// classDriver returns the driver whose devices class selects, "" when its
// selectors are not one driver comparison. check counts a device toward a class
// by its driver alone; the scheduler, which evaluates every selector, may accept
// fewer.
func classDriver(class *resourcev1.DeviceClass) string {
	driver := ""
	for _, sel := range class.Spec.Selectors {
		if sel.CEL == nil {
			continue
		}
		m := driverSelector.FindStringSubmatch(sel.CEL.Expression)
		if m == nil {
			return ""
		}
		driver = m[1]
	}
	return driver
}

// missingClasses names the DeviceClasses step s claims from that the cluster
// lacks.
func (d *devices) missingClasses(s *plan.Step) []string {
	var out []string
	for _, r := range s.DRA.Requests {
		if !d.classes[r.Class] && !slices.Contains(out, r.Class) {
			out = append(out, r.Class)
		}
	}
	return out
}

// lacks says why node n's devices cannot satisfy the claim of DRA step s, or "":
// too few devices of a class, or, for a co-located claim, no value of the
// attribute that enough devices of every class share.
func (d *devices) lacks(s *plan.Step, n *corev1.Node) string {
	devs := d.byNode[n.Name]
	var short []string
	asked := map[string]int{}
	var classes []string
	for _, r := range s.DRA.Requests {
		if asked[r.Class] == 0 {
			classes = append(classes, r.Class)
		}
		asked[r.Class] += r.Count
	}
	for _, class := range classes {
		have := 0
		for _, dev := range devs {
			if dev.classes[class] {
				have++
			}
		}
		if have < asked[class] {
			short = append(short, fmt.Sprintf("%d %s devices, %d asked", have, class, asked[class]))
		}
	}
	if len(short) > 0 {
		return "have too few devices in their ResourceSlices (" + strings.Join(short, "; ") + ")"
	}
	byName := map[string]plan.DeviceRequest{}
	for _, r := range s.DRA.Requests {
		byName[r.Name] = r
	}
	// Each constraint takes, on one value of its attribute, devices of its
	// requests' classes that no other constraint has taken. The constraints of a
	// claim ask alike (one, or pairs of GPUs and EFA interfaces), so taking the
	// first value with room places as many as any order would.
	free := map[string]map[string]map[string]int{} // attribute → value → class → devices
	for _, c := range s.DRA.Constraints {
		if free[c.MatchAttribute] != nil {
			continue
		}
		counts := map[string]map[string]int{}
		for _, dev := range devs {
			v, ok := dev.attribute(c.MatchAttribute)
			if !ok {
				continue
			}
			if counts[v] == nil {
				counts[v] = map[string]int{}
			}
			for class := range dev.classes {
				counts[v][class]++
			}
		}
		free[c.MatchAttribute] = counts
	}
	for i, c := range s.DRA.Constraints {
		counts := free[c.MatchAttribute]
		placed := false
		for _, v := range slices.Sorted(maps.Keys(counts)) {
			if slices.ContainsFunc(c.Requests, func(name string) bool { return counts[v][byName[name].Class] < byName[name].Count }) {
				continue
			}
			for _, name := range c.Requests {
				counts[v][byName[name].Class] -= byName[name].Count
			}
			placed = true
			break
		}
		if placed {
			continue
		}
		var want []string
		for _, name := range c.Requests {
			want = append(want, fmt.Sprintf("%d %s", byName[name].Count, byName[name].Class))
		}
		what := fmt.Sprintf("no %s shared by %s devices", c.MatchAttribute, strings.Join(want, " and "))
		if len(s.DRA.Constraints) > 1 {
			what = fmt.Sprintf("room for only %d of its %d groups of %s devices that share a %s", i, len(s.DRA.Constraints), strings.Join(want, " and "), c.MatchAttribute)
		}
		return "have " + what
	}
	return ""
}

// claimTemplateAccess is what RBAC must let a run do with the
// ResourceClaimTemplates it creates for its DRA steps (when create is set): create
// them, find them made on a resume, and delete them with the run.
func claimTemplateAccess(create bool) []access {
	if !create {
		return nil
	}
	var out []access
	for _, verb := range []string{"create", "get", "delete", "deletecollection"} {
		out = append(out, access{verb, resourceClaimTemplateGVR.Group, resourceClaimTemplateGVR.Resource, ""})
	}
	return out
}

// installedClaims marks unplaceable, in r, each step that claims from an
// installed ResourceClaimTemplate (sdk.Claim) its namespace lacks: its pods
// would never be scheduled. A user who may not read the templates is not told
// either way; the pods will say.
func (c *cluster) installedClaims(ctx context.Context, f *plan.Flow, r *Report) error {
	for i := range f.Steps {
		s := &f.Steps[i]
		if s.DRA == nil {
			continue
		}
		ns := s.Namespace
		if ns == "" {
			ns = c.namespace
		}
		missing, err := c.missingTemplates(ctx, s, ns)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			continue
		}
		r.refuse(i, fmt.Sprintf("it claims from the ResourceClaimTemplate %s (sdk.Claim), which namespace %s does not have: install it there, or run in the namespace that has it", strings.Join(missing, ", "), ns))
	}
	return nil
}

// claimTemplatesExist checks that every installed ResourceClaimTemplate a step
// claims from (sdk.Claim) exists in the namespace of the step's pods: a pod whose
// template does not exist is never scheduled.
func (c *cluster) claimTemplatesExist(ctx context.Context, units []*unit) error {
	seen := map[string]bool{}
	for _, u := range units {
		if u.Step.DRA == nil || seen[u.ns+"/"+u.Step.Name] {
			continue
		}
		seen[u.ns+"/"+u.Step.Name] = true // the units of a foreach step share its templates
		missing, err := c.missingTemplates(ctx, u.Step, u.ns)
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("step %s claims from the ResourceClaimTemplate %s (sdk.Claim), which does not exist in namespace %s on the cluster at %s: ask the platform team to install it there, or run in the namespace that has it (--namespace)", u.Step.Name, strings.Join(missing, ", "), u.ns, c.host)
		}
	}
	return nil
}

// missingTemplates returns the installed ResourceClaimTemplates step s claims
// from (sdk.Claim) that namespace ns lacks. A template this user may not read
// is not reported: the pods will say if it is missing.
func (c *cluster) missingTemplates(ctx context.Context, s *plan.Step, ns string) ([]string, error) {
	var missing []string
	for _, name := range s.DRA.Templates {
		_, err := c.client.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case apierrors.IsForbidden(err):
		case err != nil:
			return nil, fmt.Errorf("ResourceClaimTemplate %s of step %s: %w", name, s.Name, err)
		}
	}
	return missing, nil
}
