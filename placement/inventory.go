package placement

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/manifoldflow/manifold/plan"
)

// Inventory is what a cluster's DRA drivers publish: its DeviceClasses, and per
// node the devices of its ResourceSlices, each with the classes whose selectors
// accept it. The zero Inventory has no classes and no devices.
type Inventory struct {
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

// NeedsDevices reports whether some step of f has DRA devices of its own: only
// then does Plan need an Inventory.
func NeedsDevices(f *plan.Flow) bool {
	return slices.ContainsFunc(f.Steps, func(s plan.Step) bool { return s.DRA != nil && len(s.DRA.Requests) > 0 })
}

// NewInventory sorts the devices of slices (a cluster's ResourceSlices) by node,
// and finds which of classes (its DeviceClasses) each belongs to by the classes'
// own CEL selectors, as the scheduler does: a class whose selectors are not one
// driver comparison (device.driver == "<driver>") takes none. The devices of a
// slice that names no node are left out: a claim's pod never lands beside them.
func NewInventory(classes []resourcev1.DeviceClass, slices []resourcev1.ResourceSlice) *Inventory {
	out := &Inventory{classes: map[string]bool{}, byNode: map[string][]device{}}
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
	return out
}

// driverSelector is the CEL selector by which the Neuron, EFA and NVIDIA DRA
// drivers' DeviceClasses select their devices: device.driver == "<driver>".
var driverSelector = regexp.MustCompile(`^\s*device\.driver\s*==\s*["']([^"']+)["']\s*$`)

// classDriver returns the driver whose devices class selects, "" when its
// selectors are not one driver comparison. Plan counts a device toward a class
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
func (d *Inventory) missingClasses(s *plan.Step) []string {
	var out []string
	for _, r := range s.DRA.Requests {
		if !d.classes[r.Class] && !slices.Contains(out, r.Class) {
			out = append(out, r.Class)
		}
	}
	return out
}

// devices counts the devices of class that node publishes.
func (d *Inventory) devices(node, class string) int {
	n := 0
	for _, dev := range d.byNode[node] {
		if dev.classes[class] {
			n++
		}
	}
	return n
}

// lacks says why node n's devices cannot satisfy the claim of DRA step s, or "":
// too few devices of a class, or, for a co-located claim, no value of the
// attribute that enough devices of every class share.
func (d *Inventory) lacks(s *plan.Step, n *corev1.Node) string {
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
		if have := d.devices(n.Name, class); have < asked[class] {
			short = append(short, fmt.Sprintf("%s: %d, %d asked", class, have, asked[class]))
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
