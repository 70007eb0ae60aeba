// Package compile turns a declared flow (package sdk) and its config into a plan:
// it applies defaults and aliases, resolves instance types from the catalog, checks
// every rule, and returns every error at once, each with its field path
// (steps[train].efa: Invalid value: 32: trn1.32xlarge has at most 8 EFA interfaces).
package compile

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/robfig/cron/v3"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/image/built"
	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// MaxNameLength bounds flow and step names. Names are DNS-1123 labels, and every
// target derives object, pod and host names from them with suffixes of its own (a
// foreach index, a node rank, a controller's random suffix); 40 characters leaves
// those suffixes room within the 63 that Kubernetes allows.
const MaxNameLength = 40

// MaxTasks bounds the tasks of a flow: its steps, a foreach step counting once
// per item. A run records each task, and runs show, logs and resuming read
// them all back; a run's record is held to the same bound when it is read.
const MaxTasks = 100_000

// MaxRetry bounds sdk.Retry: a task makes at most MaxRetry+1 attempts, and a
// run's record is held to that when it is read.
const MaxRetry = 10_000

// Options are the inputs of a compile besides the flow.
type Options struct {
	// Config holds manifold.toml's defaults.
	Config Config
	// Params overrides param defaults by name (--param k=v).
	Params map[string]string
	// Overrides gives named steps options over their own (--set): a layer above
	// the step's code, as the step's code is above the flow's defaults. An
	// override replaces the option of its kind (Inferentia replaces the code's
	// Trainium; Trainium(0) takes the code's devices away).
	Overrides map[string][]sdk.StepOption
	// Artifacts and ArtifactsEndpoint, when set, replace the flow's artifact store
	// and its S3 endpoint (--artifacts, --artifacts-endpoint): see Config.
	Artifacts, ArtifactsEndpoint string
	// BuiltImage, when set, is the flow program's image as `image build` recorded
	// it (compile --image-from-build): its reference becomes the image of every Run
	// step, over the step's, the flow's and the config's own. Command steps keep
	// theirs.
	BuiltImage *built.Record
	// ReadBuiltImage reads that record (built.Read of built.File) when
	// image_from_build = true in the config asks for it and BuiltImage is nil; an
	// error that wraps fs.ErrNotExist says none was made. Compile reads no file of
	// its own.
	ReadBuiltImage func() (built.Record, error)
}

// Compile checks f and returns its plan, or every error found.
func Compile(f *sdk.Flow, o Options) (*plan.Flow, field.ErrorList) {
	if f == nil {
		return nil, field.ErrorList{field.Required(field.NewPath("flow"), "compile needs a flow: sdk.NewFlow(name, ...)")}
	}
	spec := f.Spec()
	p := &plan.Flow{Name: spec.Name}
	errs := argoSettings(p, o.Config)

	errs = append(errs, checkName(field.NewPath("name"), spec.Name, "flow")...)
	p.Params, errs = compileParams(spec.Params, o.Params, errs)
	if spec.Schedule != nil {
		p.Schedule = *spec.Schedule
		errs = append(errs, checkSchedule(field.NewPath("schedule"), p.Schedule)...)
	}

	stepsPath := field.NewPath("steps")
	if len(spec.Steps) == 0 {
		errs = append(errs, field.Required(stepsPath, "a flow needs at least one step: add one with .Step(name, options...)"))
	}
	known, overrideErrs := checkOverrides(spec.Steps, o.Overrides)
	errs = append(errs, overrideErrs...)

	entrypoint := o.Config.Entrypoint
	if entrypoint == "" {
		entrypoint = DefaultEntrypoint(spec.Name)
	} else if strings.IndexFunc(entrypoint, unicode.IsSpace) >= 0 || !utf8.ValidString(entrypoint) {
		errs = append(errs, field.Invalid(field.NewPath("config", "entrypoint"), entrypoint, "must be the path of the flow binary in its image, without spaces"))
	}
	var artifactErrs field.ErrorList
	p.Artifacts, artifactErrs = artifacts(spec, o)
	errs = append(errs, artifactErrs...)
	builtImage, builtBase, builtAt, builtErrs := runImage(spec.Name, o)
	errs = append(errs, builtErrs...)
	configSpec := o.Config.stepDefaults()
	flowLayer := layer{spec: &spec.Defaults, path: field.NewPath("flow"), name: same}
	configLayer := layer{spec: &configSpec, path: field.NewPath("config"), name: snake}
	env := stepEnv{flow: spec.Name, entrypoint: entrypoint, gpuToleration: o.Config.GPUToleration == nil || *o.Config.GPUToleration,
		artifactVolume: p.Artifacts != nil && p.Artifacts.Claim != "", nonRootImage: nonRootBase(builtBase, o.Config)}
	var classErrs field.ErrorList
	env.classes, classErrs = o.Config.DeviceClasses.deviceClasses()
	errs = append(errs, classErrs...)

	seen := map[string]int{} // the index of each step name's first step
	var steps []plan.Step
	for i := range spec.Steps {
		d := &spec.Steps[i]
		at := stepsPath.Key(d.Name)
		if d.Name == "" {
			at = stepsPath.Index(i)
		}
		errs = append(errs, checkName(at.Child("name"), d.Name, "step")...)
		if first, ok := seen[d.Name]; ok {
			errs = append(errs, fieldErr(field.ErrorTypeDuplicate, at.Child("name"), d.Name,
				fmt.Sprintf("%s and %s are both named %q: rename one of them", stepsPath.Index(first), stepsPath.Index(i), d.Name)))
			continue
		}
		seen[d.Name] = i
		var override sdk.StepSpec
		override.Apply(o.Overrides[d.Name]...)
		r := merge(d.Name, at, []layer{{spec: &override, path: at, name: same}, {spec: &d.Spec, path: at, name: same}, flowLayer, configLayer})
		if builtImage != "" && r.run != nil {
			r.image = val[string]{v: builtImage, set: true, at: builtAt}
		}
		s, stepErrs := env.compile(r, known)
		errs = append(errs, stepErrs...)
		steps = append(steps, s)
	}

	errs = append(errs, checkTasks(steps, stepsPath)...)
	errs = append(errs, checkProducers(steps, stepsPath)...)
	ordered, orderErrs := order(steps, stepsPath)
	errs = append(errs, orderErrs...)
	if len(errs) > 0 {
		return nil, redactErrors(dedupe(errs))
	}
	p.Steps = ordered
	return p, nil
}

// argoSettings checks and sets the flow's Argo settings from the config: the
// largest workflow in bytes, and how a multi-node step runs (a JobSet unless the
// config chooses).
func argoSettings(p *plan.Flow, c Config) field.ErrorList {
	var errs field.ErrorList
	p.ArgoMultiNode, p.ArgoMaxBytes = c.ArgoMultiNode, c.ArgoMaxBytes
	if p.ArgoMaxBytes < -1 {
		errs = append(errs, field.Invalid(field.NewPath("config", "argo_max_bytes"), p.ArgoMaxBytes, "must be a number of bytes, or -1 for no limit"))
	}
	if p.ArgoMultiNode == "" {
		p.ArgoMultiNode = plan.ArgoJobSet
	}
	if !validArgoMultiNode(c.ArgoMultiNode) {
		errs = append(errs, field.Invalid(field.NewPath("config", "argo_multi_node"), c.ArgoMultiNode, argoMultiNodeChoice))
	}
	return errs
}

// checkOverrides returns the names of the flow's steps, and an error for each
// --set of a step the flow does not have.
func checkOverrides(steps []sdk.StepDecl, overrides map[string][]sdk.StepOption) (map[string]bool, field.ErrorList) {
	var errs field.ErrorList
	known := map[string]bool{}
	var stepNames []string
	for _, s := range steps {
		known[s.Name] = true
		stepNames = append(stepNames, s.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if !known[name] {
			errs = append(errs, fieldErr(field.ErrorTypeNotFound, field.NewPath("set").Key(name), name, "no step of that name; the flow's steps are "+strings.Join(stepNames, ", ")+suggest.DidYouMean(name, stepNames)))
		}
	}
	return known, errs
}

// checkTasks counts the flow's tasks (a foreach step once per item) against the
// most a run can record.
func checkTasks(steps []plan.Step, stepsPath *field.Path) field.ErrorList {
	tasks := 0
	for i := range steps {
		tasks += max(len(steps[i].Foreach), 1)
	}
	if tasks > MaxTasks {
		return field.ErrorList{field.Invalid(stepsPath, tasks, fmt.Sprintf("the flow has %d tasks (steps, a foreach step counting once per item), more than the %d a run can record: split the foreach items over several runs or flows", tasks, MaxTasks))}
	}
	return nil
}

var paramName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`) })

func compileParams(declared []sdk.ParamSpec, given map[string]string, errs field.ErrorList) ([]plan.Param, field.ErrorList) {
	path := field.NewPath("params")
	var out []plan.Param
	byEnv := map[string]string{}
	names := make([]string, 0, len(declared))
	for _, d := range declared {
		at := path.Key(d.Name)
		names = append(names, d.Name)
		if !paramName().MatchString(d.Name) || len(d.Name) > 64 {
			errs = append(errs, field.Invalid(at, d.Name, "a param name starts with a letter and has only letters, digits, '_' and '-' (at most 64)"))
			continue
		}
		envName := plan.ParamEnv(d.Name)
		if other, ok := byEnv[envName]; ok {
			errs = append(errs, fieldErr(field.ErrorTypeDuplicate, at, d.Name, fmt.Sprintf("params %q and %q would both be the variable %s: rename one of them", other, d.Name, envName)))
			continue
		}
		byEnv[envName] = d.Name
		value := d.Default
		if v, ok := given[d.Name]; ok {
			value = v
		}
		errs = append(errs, CheckParamValue(d.Name, value)...)
		out = append(out, plan.Param{Name: d.Name, Value: value, Env: envName})
	}
	var unknown []string
	for name := range given {
		if !declaredParam(declared, name) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		detail := "the flow declares no params; add one with sdk.Param(name, default)"
		if len(names) > 0 {
			detail = "the flow's params are " + strings.Join(names, ", ") + suggest.DidYouMean(name, names)
		}
		errs = append(errs, fieldErr(field.ErrorTypeNotFound, path.Key(name), name, detail))
	}
	return out, errs
}

func declaredParam(declared []sdk.ParamSpec, name string) bool {
	for _, d := range declared {
		if d.Name == name {
			return true
		}
	}
	return false
}

func checkSchedule(at *field.Path, s string) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(at, "give a cron expression such as \"0 3 * * *\", or leave out sdk.Schedule")}
	}
	// The cron parser panics on a time zone prefix without a space after it
	// ("TZ=UTC"), and Kubernetes CronJobs reject the prefix anyway.
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return field.ErrorList{field.Invalid(at, s, "a schedule cannot start with TZ= or CRON_TZ= (Kubernetes CronJobs reject it); give only the cron expression, such as \"0 3 * * *\"")}
	}
	if _, err := cron.ParseStandard(s); err != nil {
		return field.ErrorList{field.Invalid(at, s, "not a cron expression ("+err.Error()+"); use five fields, minute hour day-of-month month day-of-week, such as \"0 3 * * *\", or a descriptor such as \"@daily\"")}
	}
	return nil
}

// CheckFlowName says what is wrong with a flow's name, at path at: the rule
// Compile holds flows to, and a run's record when it is read.
func CheckFlowName(at *field.Path, name string) field.ErrorList { return checkName(at, name, "flow") }

// CheckStepName says what is wrong with a step's name, at path at: the rule
// Compile holds steps to, and a run's record when it is read.
func CheckStepName(at *field.Path, name string) field.ErrorList { return checkName(at, name, "step") }

// checkName gives one error for a name that breaks any of the name rules, which
// says every rule it breaks.
func checkName(at *field.Path, name, what string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(at, "a "+what+" needs a name: lowercase letters, digits and '-'")}
	}
	var broken []string
	// The length rule below is stricter than the label's 63 bytes, and says so.
	dns := slices.DeleteFunc(content.IsDNS1123Label(name), func(msg string) bool { return msg == content.MaxLenError(content.DNS1123LabelMaxLength) })
	if len(dns) > 0 {
		broken = append(broken, "must be a DNS-1123 label: "+strings.Join(dns, "; "))
	}
	// Every object name starts with the flow's name, and Services and JobSets need
	// names that start with a letter.
	if what == "flow" && len(dns) == 0 && !unicode.IsLetter(rune(name[0])) {
		broken = append(broken, "must start with a letter, as the names of the Services and JobSets made from it must")
	}
	if len(name) > MaxNameLength {
		broken = append(broken, fmt.Sprintf("may have at most %d characters (it has %d), leaving room for the suffixes every target adds", MaxNameLength, len(name)))
	}
	if len(broken) == 0 {
		return nil
	}
	return field.ErrorList{fieldErr(field.ErrorTypeInvalid, at, name, "a "+what+" name "+strings.Join(broken, "; and it "))}
}

// dedupe drops repeated errors: a bad flow default or config value is reported once,
// not once per step.
func dedupe(errs field.ErrorList) field.ErrorList {
	seen := map[string]bool{}
	out := errs[:0:0]
	for _, e := range errs {
		if k := e.Error(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// fieldErr builds an error of any type with a detail that says what to do.
func fieldErr(t field.ErrorType, at *field.Path, value any, detail string) *field.Error {
	return &field.Error{Type: t, Field: at.String(), BadValue: value, Detail: detail}
}

func same(s string) string { return s }

// snake spells an option field the way manifold.toml does: nodeSelector → node_selector.
func snake(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('_')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
