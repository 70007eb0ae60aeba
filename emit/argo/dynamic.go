package argo

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/plan"
)

// A dynamic flow on Argo (sdk.ForeachOf, sdk.When):
//
//   - the step that publishes a value (plan.Flow.Published) gets an emptyDir
//     at plan.ValuesPath (MANIFOLD_VALUES), and its template an output
//     parameter of each value it publishes, valueFrom.path
//     <plan.ValuesPath>/<name>.json, which Argo's executor reads once the
//     step has ended and keeps in the Workflow's status;
//   - a ForeachOf step's task runs withParam over the indexes of that list,
//     [0, 1, …, n-1], made by an expression from the output parameter: the
//     list itself never becomes a node's name or a template's text. Each
//     item's task passes its index ({{item}}), the count and the element's
//     text (InputCount, InputItem) as arguments made by expressions (ItemExpr),
//     in which the producer's output is data, never code;
//   - a When step's task has a when that compares, as JSON, the output
//     parameter decoded (fromJSON) with the step's value, written in the
//     expression as a string literal of \u escapes (WhenExpr);
//   - depends (Depends): a step that waits for steps that may not run (a
//     branch not taken is Skipped, a step whose depends is false is Omitted,
//     a fan-out over no item is Skipped) waits for each to be Succeeded,
//     Skipped or Omitted; and when every step it waits for may not run, at
//     least one must have run (Succeeded, or Skipped for a fan-out over no
//     item), else Argo omits it: a step waiting only for steps not taken is
//     not taken either.
const (
	// InputCount is the input parameter of a ForeachOf step's template that
	// holds the number of items (MANIFOLD_COUNT).
	InputCount = "count"
)

// outputName matches the names Argo takes for an output parameter.
var outputName = regexp.MustCompile(`^[-a-zA-Z0-9_]+$`)

// checkDynamic returns what the argo target cannot take of f's dynamic steps:
// without an artifact store the items' artifacts reach no join; a published
// value's name must be an Argo parameter name; a step that both fans out and
// branches is ambiguous to depends (Argo skips it either way); and a
// multi-node step is created by resource templates that have neither
// outputs nor the depends of a branch.
func checkDynamic(f *plan.Flow) field.ErrorList {
	if f.Dynamic() == nil {
		return nil
	}
	var errs field.ErrorList
	if f.Artifacts == nil {
		s := f.Dynamic()
		errs = append(errs, field.Required(stepPath(s).Child(dynamicOption(s)),
			"on Argo the items and branches of a dynamic flow pass their artifacts through the flow's artifact store, and the flow has none: set artifacts in manifold.toml (s3://bucket/prefix or pvc://CLAIM), --artifacts, or sdk.ArtifactVolume"))
	}
	d := newDynamicFlow(f)
	for i := range f.Steps {
		s := &f.Steps[i]
		at := stepPath(s)
		for _, name := range d.published[s.Name] {
			if !outputName.MatchString(name) {
				errs = append(errs, field.Invalid(at, name, fmt.Sprintf(
					"a later step fans out over or branches on %s's value %q, which Argo passes as an output parameter, whose name holds only letters, digits, '-' and '_'; name the value without '.'", s.Name, name)))
			}
			if s.Nodes > 1 {
				errs = append(errs, field.Invalid(at.Child("nodes"), s.Nodes,
					"on Argo a multi-node step runs as an object a resource template creates, which has no output to publish a value from; publish the value from a step of one node"))
			}
		}
		if p := d.byName[refStep(s)]; s.ForeachOf != nil && s.Body == plan.BodyRun && p != nil && p.Body == plan.BodyCommand &&
			f.Artifacts != nil && f.Artifacts.Claim == "" {
			errs = append(errs, field.Invalid(at.Child("foreachOf").Child("step"), p.Name, fmt.Sprintf(
				"a Run step reads its item from the artifact store, and %s, a Command step, cannot put its list %s in an S3 store: publish the list from a Run step, or use a volume store (pvc://CLAIM) where %s also writes $MANIFOLD_ARTIFACTS/%s.json", p.Name, s.ForeachOf.Name, p.Name, s.ForeachOf.Name)))
		}
		if s.ForeachOf != nil && s.When != nil {
			errs = append(errs, field.Invalid(at.Child("when"), s.When.Value,
				"on Argo a fan-out over no item and a branch not taken are both skipped, so the steps after it could not tell them apart; branch in a step of its own, before or after the fan-out"))
		}
		if s.Nodes > 1 && (s.Dynamic() || waitsForNotTakable(s, d.mayNot)) {
			errs = append(errs, field.Invalid(at.Child("nodes"), s.Nodes,
				"on Argo a multi-node step runs as tasks that create objects, which neither fan out over a value found at run time nor follow a branch; give the step one node, or wait for it from a step of one node"))
		}
	}
	return errs
}

// refStep is the step whose list s fans out over, "" for a step that does
// not fan out over one.
func refStep(s *plan.Step) string {
	if s.ForeachOf == nil {
		return ""
	}
	return s.ForeachOf.Step
}

func dynamicOption(s *plan.Step) string {
	if s.ForeachOf != nil {
		return "foreachOf"
	}
	return "when"
}

// notTakable returns the steps of f that may not run although nothing failed:
// a step of sdk.When, and a step that waits only for such steps.
func notTakable(f *plan.Flow) map[string]bool {
	m := map[string]bool{}
	for i := range f.Steps {
		s := &f.Steps[i]
		m[s.Name] = s.When != nil || len(s.After) > 0 && waitsOnlyForNotTakable(s, m)
	}
	return m
}

func waitsOnlyForNotTakable(s *plan.Step, m map[string]bool) bool {
	for _, a := range s.After {
		if !m[a] {
			return false
		}
	}
	return true
}

func waitsForNotTakable(s *plan.Step, m map[string]bool) bool {
	for _, a := range s.After {
		if m[a] {
			return true
		}
	}
	return false
}

// Depends returns the depends of step s of f (see the comment on InputCount);
// byName finds the steps s waits for, mayNot is notTakable(f).
func Depends(s *plan.Step, byName func(string) *plan.Step, mayNot map[string]bool) string {
	if !waitsForNotTakable(s, mayNot) {
		after := make([]string, len(s.After))
		for i, a := range s.After {
			after[i] = TaskName(a)
		}
		return strings.Join(after, " && ")
	}
	var all, ran []string
	for _, a := range s.After {
		t := TaskName(a)
		d := byName(a)
		all = append(all, "("+t+".Succeeded || "+t+".Skipped || "+t+".Omitted)")
		if d != nil && d.ForeachOf != nil {
			ran = append(ran, t+".Succeeded || "+t+".Skipped")
		} else {
			ran = append(ran, t+".Succeeded")
		}
	}
	out := strings.Join(all, " && ")
	if waitsOnlyForNotTakable(s, mayNot) {
		out += " && (" + strings.Join(ran, " || ") + ")"
	}
	return out
}

// output is the expression of the output parameter name of step: data that
// the expression reads, never text that Argo templates.
func output(step, name string) string {
	return "tasks['" + TaskName(step) + "'].outputs.parameters['" + name + "']"
}

// exprString returns s as a string literal of Argo's expressions (expr-lang)
// holding only letters, digits, spaces, a few marks of punctuation and \u
// escapes: no quote, backslash, brace or "$" that Argo's templating or the
// expression's parser could read.
func exprString(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(" ,.:;-_()/", r):
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// WhenExpr is the when of step s of sdk.When: true when the value s branches
// on, decoded, equals s's value, decoded.
func WhenExpr(s *plan.Step) string {
	return "{{=fromJSON(" + output(s.When.Ref.Step, s.When.Ref.Name) + ") == fromJSON(" + exprString(s.When.Value) + ")}}"
}

// MaxItems is the most items a fan-out over a value found at run time has
// on Argo. Argo keeps every node of a running Workflow in its status, a node
// per item and one per attempt, and refuses a Workflow grown past what the
// API server keeps in one object; measured on Argo v3.7.18 (see
// docs/targets.md, BenchmarkDynamicFanOut in runtimes/argo), a fan-out of
// MaxItems items of one attempt each stays well inside it.
const MaxItems = 5000

// ParamExpr is the withParam of step s of sdk.ForeachOf: the indexes of the
// list it fans out over; past MaxItems, the text TooMany says, which Argo
// refuses as a list, so that the run fails with that message before Argo
// makes a node of any item.
func ParamExpr(s *plan.Step) string {
	n := countExpr(s)
	before, after := tooMany(s)
	return "{{=" + n + " > " + strconv.Itoa(MaxItems) + " ? " + exprString(before) + " + string(" + n + ") + " +
		exprString(after) + " : toJson(0..(" + n + "-1))}}"
}

// TooMany says that step s of sdk.ForeachOf cannot fan out over n items, n
// being more than MaxItems: the message of a run whose list is that long.
func TooMany(s *plan.Step, n int) string {
	before, after := tooMany(s)
	return before + strconv.Itoa(n) + after
}

func tooMany(s *plan.Step) (before, after string) {
	return fmt.Sprintf("step %s fans out over more than %d items (Argo keeps a node per item in the Workflow, which the API server keeps whole): the list %s put as %s has ",
		s.Name, MaxItems, s.ForeachOf.Step, s.ForeachOf.Name), " items; fan out over batches of items, or run the flow with run --kube"
}

func countExpr(s *plan.Step) string {
	return "len(fromJSON(" + output(s.ForeachOf.Step, s.ForeachOf.Name) + "))"
}

// ItemExpr is the item argument of an item of step s of sdk.ForeachOf: the
// text of the element at the item's index (a string's, any other value as
// JSON, sdk.ItemText), with each "$" written "$$" and each "{{" as
// $(MANIFOLD_BRACES), so that the kubelet's expansion of MANIFOLD_ITEM gives
// back exactly the text, and no "{{" reaches Argo's templating of the
// template it is passed to.
func ItemExpr(s *plan.Step) string {
	// The element is written out each time it is read: Argo takes a
	// variable an expression declares (let) for a variable it lacks.
	v := "fromJSON(" + output(s.ForeachOf.Step, s.ForeachOf.Name) + ")[int(item)]"
	text := "(type(" + v + ") == 'string' ? " + v + " : sprig.toRawJson(" + v + "))"
	dollars := "replace(" + text + ", " + exprString("$") + ", " + exprString("$$") + ")"
	return "{{=replace(" + dollars + ", " + exprString("{{") + ", " + exprString(braces) + ")}}"
}

// dynamicTask sets the withParam, arguments and when of task t of step s.
func dynamicTask(s *plan.Step, t *wfv1.DAGTask) {
	if s.ForeachOf != nil {
		t.WithParam = ParamExpr(s)
		t.Arguments.Parameters = []wfv1.Parameter{
			{Name: InputItem, Value: wfv1.AnyStringPtr(ItemExpr(s))},
			{Name: InputIndex, Value: wfv1.AnyStringPtr("{{item}}")},
			{Name: InputCount, Value: wfv1.AnyStringPtr("{{=" + countExpr(s) + "}}")},
		}
	}
	if s.When != nil {
		t.When = WhenExpr(s)
	}
}

// itemInputs are the template inputs that carry a ForeachOf item to its pod,
// as PodOptions gives them to it: as expressions, so that Argo writes each
// value as JSON, whatever characters it holds.
var itemInputs = []wfv1.Parameter{{Name: InputItem}, {Name: InputIndex}, {Name: InputCount}}

func inputTag(name string) string { return "{{=inputs.parameters['" + name + "']}}" }

// dynamicFlow is what the tasks and templates of a dynamic flow need,
// computed once for the flow.
type dynamicFlow struct {
	f         *plan.Flow
	byName    map[string]*plan.Step
	published map[string][]string
	mayNot    map[string]bool
}

// newDynamicFlow returns f's dynamicFlow, nil when f has no dynamic step.
func newDynamicFlow(f *plan.Flow) *dynamicFlow {
	if f.Dynamic() == nil {
		return nil
	}
	d := &dynamicFlow{f: f, byName: map[string]*plan.Step{}, published: map[string][]string{}, mayNot: notTakable(f)}
	for i := range f.Steps {
		s := &f.Steps[i]
		d.byName[s.Name] = s
		if s.ForeachOf != nil {
			d.published[s.ForeachOf.Step] = append(d.published[s.ForeachOf.Step], s.ForeachOf.Name)
		}
		if s.When != nil {
			d.published[s.When.Ref.Step] = append(d.published[s.When.Ref.Step], s.When.Ref.Name)
		}
	}
	for step, names := range d.published {
		slices.Sort(names)
		d.published[step] = slices.Compact(names)
	}
	return d
}

// publishes reports whether the step called step publishes a value.
func (d *dynamicFlow) publishes(step string) bool { return d != nil && len(d.published[step]) > 0 }

// template adds to the template t of step s its outputs and item inputs.
func (d *dynamicFlow) template(s *plan.Step, t *wfv1.Template) {
	if d == nil {
		return
	}
	for _, name := range d.published[s.Name] {
		if t.Outputs.Parameters == nil {
			t.Outputs = wfv1.Outputs{}
		}
		t.Outputs.Parameters = append(t.Outputs.Parameters, wfv1.Parameter{Name: name, ValueFrom: &wfv1.ValueFrom{Path: plan.ValuesPath + "/" + name + ".json"}})
	}
	if s.ForeachOf != nil {
		t.Inputs.Parameters = slices.Clone(itemInputs)
	}
}

// task sets the depends, withParam, arguments and when of task t of step s.
func (d *dynamicFlow) task(s *plan.Step, t *wfv1.DAGTask) {
	if d == nil {
		return
	}
	t.Depends = Depends(s, func(name string) *plan.Step { return d.byName[name] }, d.mayNot)
	dynamicTask(s, t)
}
