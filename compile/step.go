package compile

import (
	"fmt"
	"maps"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/plan"
)

// stepEnv is what every step of one compile shares.
type stepEnv struct {
	flow          string
	entrypoint    string
	gpuToleration bool
	// classes are the DeviceClasses DRA steps claim from.
	classes deviceClasses
	// artifactVolume is set when every pod mounts the flow's artifact volume at
	// plan.ArtifactVolumePath.
	artifactVolume bool
	// nonRootImage is set when the flow's own image, which Run steps run, is
	// known to run as a non-root user (nonRootBase).
	nonRootImage bool
}

// compile checks one merged step and builds its plan. known holds every step name
// of the flow, for After.
func (e stepEnv) compile(r *resolved, known map[string]bool) (plan.Step, field.ErrorList) {
	s := plan.Step{Name: r.name}
	var errs field.ErrorList
	errs = append(errs, e.body(r, &s)...)
	errs = append(errs, checkOrder(r, &s, known)...)
	res, resErrs := resources(r, e.gpuToleration)
	errs = append(errs, resErrs...)
	s.Neuron, s.EFA, s.EFAAll, s.GPU, s.GPUResource = res.neuron, res.efa, res.efaAll, res.gpu, res.gpuResource
	s.InstanceType = r.instanceType.v
	s.Requests, s.Limits = res.requests, res.limits
	s.SharedMemory = res.sharedMemory
	errs = append(errs, e.dra(r, &s, &res)...)
	errs = append(errs, wiring(r, &s, res.efaRemoved)...)
	errs = append(errs, placement(r, &s, res.tolerations)...)
	errs = append(errs, e.pod(r, &s)...)
	errs = append(errs, multiNode(r, &s)...)
	errs = append(errs, topology(r, &s)...)
	errs = append(errs, queueing(r, &s)...)
	errs = append(errs, failure(r, &s)...)
	return s, errs
}

func (e stepEnv) body(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	switch {
	case r.run != nil && r.command != nil:
		errs = append(errs, field.Forbidden(r.at.Child("command"), "a step runs either sdk.Run(fn) or sdk.Command(argv...), not both"))
	case r.run != nil:
		s.Body = plan.BodyRun
		s.Command = []string{e.entrypoint, "step", r.name}
	case r.command != nil:
		s.Body = plan.BodyCommand
		s.Command = append([]string(nil), r.command...)
		for i, arg := range r.command {
			errs = append(errs, checkText(r.at.Child("command").Index(i), arg)...)
		}
		if len(r.command) == 0 || r.command[0] == "" {
			errs = append(errs, field.Required(r.at.Child("command"), "sdk.Command needs the program to run, such as sdk.Command(\"python\", \"train.py\")"))
		}
	default:
		errs = append(errs, field.Required(r.at.Child("run"), "a step needs a body: sdk.Run(fn) for Go code, or sdk.Command(argv...) for a program in its image"))
	}
	if !r.image.set || r.image.v == "" {
		what := "a Command step runs in an image"
		if r.run != nil {
			what = "a Run step runs this flow's binary, which must be in its image: build that image with `" + e.flow + " image build --push --tag REF` and compile with --image-from-build (or image_from_build = true in manifold.toml), or"
		} else {
			what += ":"
		}
		errs = append(errs, field.Required(r.at.Child("image"), what+" set sdk.Image on the step or the flow, image in manifold.toml, or --set "+r.name+".image=REF"))
	} else {
		s.Image = r.image.v
		errs = append(errs, checkText(r.image.at, r.image.v)...)
		if strings.IndexFunc(r.image.v, unicode.IsSpace) >= 0 {
			errs = append(errs, field.Invalid(r.image.at, r.image.v, "an image reference has no spaces"))
		}
	}
	return errs
}

func checkOrder(r *resolved, s *plan.Step, known map[string]bool) field.ErrorList {
	errs := checkDynamic(r, s, known)
	seen := map[string]bool{}
	for i, a := range r.after {
		at := r.at.Child("after").Index(i)
		switch {
		case a == r.name:
			errs = append(errs, field.Invalid(at, a, "a step cannot wait for itself"))
		case !known[a]:
			errs = append(errs, fieldErr(field.ErrorTypeNotFound, at, a, "no step of that name; sdk.After names steps of the same flow"+suggest.DidYouMean(a, slices.Sorted(maps.Keys(known)))))
		case !seen[a]:
			seen[a] = true
			s.After = append(s.After, a)
		}
	}
	if r.foreach != nil {
		if len(r.foreach) == 0 {
			errs = append(errs, field.Required(r.at.Child("foreach"), "sdk.Foreach needs at least one item"))
		}
		s.Foreach = append([]string{}, r.foreach...)
		for i, item := range r.foreach {
			errs = append(errs, checkText(r.at.Child("foreach").Index(i), item)...)
		}
	}
	return errs
}

func placement(r *resolved, s *plan.Step, accelTolerations []plan.Toleration) field.ErrorList {
	var errs field.ErrorList
	selector := map[string]string{}
	for _, it := range r.nodeSelector {
		errs = append(errs, checkLabel(it.at, it.v.Key, it.v.Value)...)
		selector[it.v.Key] = it.v.Value
		// A node selector for the instance type conflicts with InstanceType given at
		// the same or a lower layer; InstanceType at a higher layer replaces it.
		if t := r.instanceType; t.set && it.v.Key == plan.LabelInstanceType && it.v.Value != t.v && it.layer <= t.layer {
			errs = append(errs, field.Invalid(it.at, it.v.Value, fmt.Sprintf("conflicts with sdk.InstanceType(%q) at %s: give the instance type once", t.v, t.at)))
		}
	}
	if t := r.instanceType.v; t != "" {
		selector[plan.LabelInstanceType] = t
	}
	s.NodeSelector = sortedPairs(selector)

	seen := map[plan.Toleration]bool{}
	for _, it := range r.tolerations {
		t := plan.Toleration(it.v)
		errs = append(errs, checkToleration(it.at, t)...)
		if !seen[t] {
			seen[t] = true
			s.Tolerations = append(s.Tolerations, t)
		}
	}
	for _, t := range accelTolerations {
		if !seen[t] {
			seen[t] = true
			s.Tolerations = append(s.Tolerations, t)
		}
	}
	return errs
}

func checkToleration(at *field.Path, t plan.Toleration) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range content.IsLabelKey(t.Key) {
			errs = append(errs, field.Invalid(at.Child("key"), t.Key, msg))
		}
	}
	switch t.Operator {
	case "Exists":
		if t.Value != "" {
			errs = append(errs, field.Invalid(at.Child("value"), t.Value, "must be empty when the operator is Exists"))
		}
	case "Equal":
		if t.Key == "" {
			errs = append(errs, field.Required(at.Child("key"), "a toleration with a value needs the taint's key"))
		}
		for _, msg := range content.IsLabelValue(t.Value) {
			errs = append(errs, field.Invalid(at.Child("value"), t.Value, msg))
		}
	default:
		errs = append(errs, field.NotSupported(at.Child("operator"), t.Operator, []string{"Equal", "Exists"}))
	}
	switch t.Effect {
	case "", "NoSchedule", "PreferNoSchedule", "NoExecute":
	default:
		errs = append(errs, field.NotSupported(at.Child("effect"), t.Effect, []string{"NoSchedule", "PreferNoSchedule", "NoExecute", "(empty: every effect)"}))
	}
	return errs
}

// reservedLabel reports whether Manifold sets the label key itself.
func reservedLabel(key string) bool {
	return strings.HasPrefix(key, "manifold.dev/") || key == plan.LabelName || key == plan.LabelPartOf
}

// pod sets the pod-level fields of s from the step's options, in the order the
// checks report: where and as whom it runs, its environment, its labels and
// annotations, its volumes and its security settings.
func (e stepEnv) pod(r *resolved, s *plan.Step) field.ErrorList {
	errs := podAccess(r, s)
	errs = append(errs, podEnv(r, s)...)
	errs = append(errs, e.podMetadata(r, s)...)
	errs = append(errs, e.podVolumes(r, s)...)
	return append(errs, e.podSecurity(r, s)...)
}

// podAccess checks and sets the namespace, the image pull policy and secrets, the
// service account and the secrets the step reads.
func podAccess(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	if r.namespace.set {
		s.Namespace = r.namespace.v
		for _, msg := range content.IsDNS1123Label(r.namespace.v) {
			errs = append(errs, field.Invalid(r.namespace.at, r.namespace.v, msg))
		}
	}
	if r.imagePullPolicy.set {
		switch r.imagePullPolicy.v {
		case "Always", "IfNotPresent", "Never":
			s.ImagePullPolicy = r.imagePullPolicy.v
		default:
			errs = append(errs, field.NotSupported(r.imagePullPolicy.at, r.imagePullPolicy.v, []string{"Always", "IfNotPresent", "Never"}))
		}
	}
	s.ImagePullSecrets, errs = objectNames(r.imagePullSecrets, errs)
	if r.serviceAccount.set {
		s.ServiceAccount = r.serviceAccount.v
		errs = append(errs, checkObjectName(r.serviceAccount.at, r.serviceAccount.v)...)
	}
	s.Secrets, errs = objectNames(r.secrets, errs)
	return errs
}

// podEnv checks and sets the environment variables: valid names outside
// MANIFOLD_, and valid secret references.
func podEnv(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	for _, it := range r.env {
		v := it.v
		for _, msg := range validation.IsEnvVarName(v.Name) {
			errs = append(errs, field.Invalid(it.at, v.Name, msg))
		}
		if strings.HasPrefix(v.Name, "MANIFOLD_") {
			errs = append(errs, field.Forbidden(it.at, "variables starting MANIFOLD_ are Manifold's own (params reach steps as MANIFOLD_PARAM_<NAME>); choose another name"))
		}
		if v.SecretName != "" || v.SecretKey != "" {
			errs = append(errs, checkObjectName(it.at.Child("secret"), v.SecretName)...)
			for _, msg := range validation.IsConfigMapKey(v.SecretKey) {
				errs = append(errs, field.Invalid(it.at.Child("key"), v.SecretKey, msg))
			}
		}
		errs = append(errs, checkText(it.at, v.Value)...)
		s.Env = append(s.Env, plan.EnvVar(v))
	}
	return errs
}

// podMetadata sets the labels Manifold gives every step and the labels and
// annotations the step asks, none of which may take Manifold's own keys.
func (e stepEnv) podMetadata(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	labels := map[string]string{
		plan.LabelName:   e.flow,
		plan.LabelPartOf: plan.PartOf,
		plan.LabelFlow:   e.flow,
		plan.LabelStep:   r.name,
	}
	for _, it := range r.labels {
		if reservedLabel(it.v.Key) {
			errs = append(errs, field.Forbidden(it.at, "Manifold sets this label itself; choose another key"))
			continue
		}
		errs = append(errs, checkLabel(it.at, it.v.Key, it.v.Value)...)
		labels[it.v.Key] = it.v.Value
	}
	s.Labels = sortedPairs(labels)
	annotations := map[string]string{}
	for _, it := range r.annotations {
		if strings.HasPrefix(it.v.Key, "manifold.dev/") {
			errs = append(errs, field.Forbidden(it.at, "annotations under manifold.dev/ are Manifold's own; choose another key"))
			continue
		}
		for _, msg := range content.IsLabelKey(it.v.Key) {
			errs = append(errs, field.Invalid(it.at, it.v.Key, msg))
		}
		errs = append(errs, checkText(it.at, it.v.Value)...)
		annotations[it.v.Key] = it.v.Value
	}
	s.Annotations = sortedPairs(annotations)
	return errs
}

// podVolumes checks and sets the volumes: each at a clean absolute path that no
// other volume, shared memory or the artifact volume takes.
func (e stepEnv) podVolumes(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	mounts := map[string]bool{}
	volumeAt := map[string]int{} // the volume first mounted at each path
	shm := "sdk.SharedMemory already mounts /dev/shm"
	if s.EFAWiring != nil {
		shm = "sdk.EFAWiring mounts a memory-backed /dev/shm (sdk.SharedMemory sets its size)"
	}
	if s.MountsSharedMemory() {
		mounts["/dev/shm"] = true
	}
	for i, it := range r.volumes {
		v := it.v
		errs = append(errs, checkObjectName(it.at.Child("claim"), v.Claim)...)
		switch {
		case !path.IsAbs(v.Path) || path.Clean(v.Path) != v.Path || strings.Contains(v.Path, ":"):
			errs = append(errs, field.Invalid(it.at.Child("path"), v.Path, "must be a clean absolute path without ':', such as /data"))
		case mounts[v.Path] && v.Path == "/dev/shm":
			errs = append(errs, field.Forbidden(it.at.Child("path"), shm))
		case e.artifactVolume && v.Path == plan.ArtifactVolumePath:
			errs = append(errs, field.Forbidden(it.at.Child("path"), "the flow's artifact volume is mounted at "+plan.ArtifactVolumePath+"; choose another path"))
		case mounts[v.Path]:
			first := r.volumes[volumeAt[v.Path]]
			errs = append(errs, fieldErr(field.ErrorTypeDuplicate, it.at.Child("path"), v.Path,
				fmt.Sprintf("%s (claim %s) is mounted at %s already: mount claim %s at another path, or leave one of them out", first.at, first.v.Claim, v.Path, v.Claim)))
		default:
			volumeAt[v.Path] = i
		}
		mounts[v.Path] = true
		s.Volumes = append(s.Volumes, plan.Volume{Name: fmt.Sprintf("pvc-%d", i), Claim: v.Claim, Path: v.Path})
	}
	return errs
}

// podSecurity checks and sets the port, the user the step runs as and whether it
// runs as non-root, host networking and whether it keeps artifacts.
func (e stepEnv) podSecurity(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	if r.port.set {
		s.Port = r.port.v
		for _, msg := range validation.IsValidPortNum(r.port.v) {
			errs = append(errs, field.Invalid(r.port.at, r.port.v, msg))
		}
	}
	if r.runAsUser.set {
		s.RunAsUser = &r.runAsUser.v
		if r.runAsUser.v < 0 || r.runAsUser.v > math.MaxInt32 {
			errs = append(errs, field.Invalid(r.runAsUser.at, r.runAsUser.v, "must be a user id from 0 to 2147483647"))
		}
	}
	if r.runAsNonRoot.set {
		s.RunAsNonRoot = &r.runAsNonRoot.v
		if r.runAsNonRoot.v && r.runAsUser.set && r.runAsUser.v == 0 {
			errs = append(errs, field.Forbidden(r.runAsNonRoot.at, "RunAsNonRoot(true) with RunAsUser(0) can never start: choose a non-zero user id"))
		}
	}
	// Pod Security's restricted level asks for runAsNonRoot=true; it is claimed
	// only where it is known: a non-zero RunAsUser, or a Run step on the flow's
	// own image built on a base that runs as non-root. Another image may run as
	// root, and is given no user it did not ask for.
	if !r.runAsNonRoot.set && ((r.runAsUser.set && r.runAsUser.v > 0) || (!r.runAsUser.set && s.Body == plan.BodyRun && e.nonRootImage)) {
		s.RunAsNonRoot = new(true)
	}
	s.HostNetwork = r.hostNetwork.set && r.hostNetwork.v
	s.NoArtifacts = r.noArtifacts.set && r.noArtifacts.v
	return errs
}

// MaxNodes is the most nodes one step may run on: Kubernetes' limit on an Indexed
// Job's completions.
const MaxNodes = 100000

// multiNode sets the node count and, for several nodes, the rendezvous port.
func multiNode(r *resolved, s *plan.Step) field.ErrorList {
	s.Nodes = 1
	if !r.nodes.set {
		return nil
	}
	if r.nodes.v < 1 || r.nodes.v > MaxNodes {
		return field.ErrorList{field.Invalid(r.nodes.at, r.nodes.v, fmt.Sprintf("must be from 1 to %d nodes; sdk.Nodes(1), the default, runs one pod", MaxNodes))}
	}
	s.Nodes = r.nodes.v
	if s.Nodes == 1 {
		return nil
	}
	var errs field.ErrorList
	if s.Port == 0 {
		s.Port = plan.DefaultPort
	}
	if s.Neuron > 0 && s.Port == plan.NeuronRootCommPort {
		errs = append(errs, field.Invalid(r.port.at, s.Port, fmt.Sprintf("rank 0's Neuron runtime listens on %d on a multi-node Trainium step; choose another sdk.Port", plan.NeuronRootCommPort)))
	}
	for _, it := range r.env {
		if rendezvousEnv[it.v.Name] {
			errs = append(errs, field.Forbidden(it.at, "Manifold sets this variable on every node of a multi-node step; choose the port with sdk.Port, and read the rest"))
		}
	}
	return errs
}

// rendezvousEnv holds the variables a multi-node step's nodes get from Manifold that
// do not start with MANIFOLD_ (those are refused on every step).
var rendezvousEnv = map[string]bool{
	plan.EnvMasterAddr: true, plan.EnvMasterPort: true,
	plan.EnvPETNNodes: true, plan.EnvPETNodeRank: true, plan.EnvPETMasterAddr: true, plan.EnvPETMasterPort: true,
	plan.EnvNeuronRootComm: true,
}

func failure(r *resolved, s *plan.Step) field.ErrorList {
	var errs field.ErrorList
	if r.retry.set {
		s.Retry = r.retry.v
		if r.retry.v < 0 || r.retry.v > MaxRetry {
			errs = append(errs, field.Invalid(r.retry.at, r.retry.v, fmt.Sprintf("must be from 0 to %d retries; leave out sdk.Retry for none", MaxRetry)))
		}
	}
	if r.retryBackoff.set {
		s.RetryBackoff = r.retryBackoff.v
		if r.retryBackoff.v < 0 {
			errs = append(errs, field.Invalid(r.retryBackoff.at, r.retryBackoff.v.String(), "must not be negative"))
		}
	}
	if r.timeout.set {
		s.Timeout = r.timeout.v
		if r.timeout.v < time.Second {
			errs = append(errs, field.Invalid(r.timeout.at, r.timeout.v.String(), "must be at least 1s; leave out sdk.Timeout for no limit"))
		}
	}
	return errs
}

func checkLabel(at *field.Path, key, value string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(key) {
		errs = append(errs, field.Invalid(at, key, msg))
	}
	for _, msg := range content.IsLabelValue(value) {
		errs = append(errs, field.Invalid(at, value, msg))
	}
	return errs
}

// checkText refuses strings that are not UTF-8: every target's format (JSON, YAML,
// Python) would change them on the way to the pod.
func checkText(at *field.Path, s string) field.ErrorList {
	if utf8.ValidString(s) {
		return nil
	}
	return field.ErrorList{field.Invalid(at, strings.ToValidUTF8(s, "\uFFFD"), "must be UTF-8 text; it holds bytes that are not (shown as \uFFFD), which no target carries as they are: write the value in UTF-8")}
}

// CheckParamValue checks a value given to param name where no compile sees it
// (trigger's --param, the variables of a step's container), as the compile
// checks every value: it must be UTF-8 text. Its errors are at params[name].
func CheckParamValue(name, value string) field.ErrorList {
	return checkText(field.NewPath("params").Key(name), value)
}

func checkObjectName(at *field.Path, name string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(at, name, msg))
	}
	return errs
}

// objectNames checks and dedupes a list of object names, keeping the first order.
func objectNames(items []item[string], errs field.ErrorList) ([]string, field.ErrorList) {
	var out []string
	seen := map[string]bool{}
	for _, it := range items {
		errs = append(errs, checkObjectName(it.at, it.v)...)
		if !seen[it.v] {
			seen[it.v] = true
			out = append(out, it.v)
		}
	}
	return out, errs
}

func sortedPairs(m map[string]string) []plan.KeyValue {
	out := make([]plan.KeyValue, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, plan.KeyValue{Key: k, Value: m[k]})
	}
	return out
}

// quantity parses a positive resource quantity and returns its canonical form.
func quantity(v val[string], what string) (string, field.ErrorList) {
	q, err := resource.ParseQuantity(v.v)
	if err != nil {
		return "", field.ErrorList{field.Invalid(v.at, v.v, fmt.Sprintf("not a quantity; write %s", what))}
	}
	if q.Sign() <= 0 {
		return "", field.ErrorList{field.Invalid(v.at, v.v, "must be more than zero; leave the option out to request none")}
	}
	return q.String(), nil
}

func sortQuantities(qs []plan.Quantity) []plan.Quantity {
	sort.Slice(qs, func(i, j int) bool { return qs[i].Name < qs[j].Name })
	return qs
}
