package compile

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/internal/suggest"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// checkDynamic checks a step's sdk.ForeachOf and sdk.When and puts them in s:
// each names a step of the flow other than this one and an artifact name, and
// the step waits for the step it names (added to After when not there).
func checkDynamic(r *resolved, s *plan.Step, known map[string]bool) field.ErrorList {
	var errs field.ErrorList
	if f := r.foreachOf; f != nil {
		at := r.at.Child("foreachOf")
		if ref, es := checkRef(r, s, at, *f, known); len(es) > 0 {
			errs = append(errs, es...)
		} else {
			s.ForeachOf = &ref
		}
	}
	if w := r.when; w != nil {
		at := r.at.Child("when")
		ref, es := checkRef(r, s, at, w.ValueRef, known)
		errs = append(errs, es...)
		errs = append(errs, checkWhenValue(at.Child("value"), w.Value)...)
		if len(es) == 0 {
			s.When = &plan.Condition{Ref: ref, Value: w.Value}
		}
	}
	return errs
}

// checkRef checks that ref names another step of the flow and an artifact
// name, and makes s wait for that step.
func checkRef(r *resolved, s *plan.Step, at *field.Path, ref sdk.ValueRef, known map[string]bool) (plan.ValueRef, field.ErrorList) {
	switch {
	case ref.Step == r.name:
		return plan.ValueRef{}, field.ErrorList{field.Invalid(at.Child("step"), ref.Step, "a step cannot read a value it puts itself: name the earlier step that puts it")}
	case !known[ref.Step]:
		return plan.ValueRef{}, field.ErrorList{fieldErr(field.ErrorTypeNotFound, at.Child("step"), ref.Step, "no step of that name; it names the step that puts the value"+suggest.DidYouMean(ref.Step, slices.Sorted(maps.Keys(known))))}
	}
	if err := sdk.CheckArtifactName(ref.Name); err != nil {
		return plan.ValueRef{}, field.ErrorList{field.Invalid(at.Child("name"), ref.Name, err.Error())}
	}
	if !slices.Contains(r.after, ref.Step) {
		r.after = append(slices.Clip(r.after), ref.Step)
	}
	return plan.ValueRef{Step: ref.Step, Name: ref.Name}, nil
}

// checkWhenValue checks sdk.When's value: the JSON of a string, number, bool
// or null.
func checkWhenValue(at *field.Path, value string) field.ErrorList {
	var v any
	if value == "" || json.Unmarshal([]byte(value), &v) != nil {
		return field.ErrorList{field.Invalid(at, value, "sdk.When's value has no JSON encoding: give a string, number, bool or nil")}
	}
	switch v.(type) {
	case map[string]any, []any:
		return field.ErrorList{field.Invalid(at, value, "sdk.When compares with one value: give a string, number, bool or nil, not "+fmt.Sprintf("%T", v))}
	}
	return checkText(at, value)
}

// checkProducers checks, once every step is compiled, that the value each
// dynamic step reads is put by a step that runs once: a fan-out over what each
// item of a foreach put would be a nested fan-out, which is not taken.
func checkProducers(steps []plan.Step, at *field.Path) field.ErrorList {
	byName := make(map[string]*plan.Step, len(steps))
	for i := range steps {
		byName[steps[i].Name] = &steps[i]
	}
	var errs field.ErrorList
	for _, s := range steps {
		refs := map[string]*plan.ValueRef{}
		if s.ForeachOf != nil {
			refs["foreachOf"] = s.ForeachOf
		}
		if s.When != nil {
			refs["when"] = &s.When.Ref
		}
		for _, key := range slices.Sorted(maps.Keys(refs)) {
			p := byName[refs[key].Step]
			if p == nil || !p.FansOut() {
				continue
			}
			errs = append(errs, field.Invalid(at.Key(s.Name).Child(key).Child("step"), p.Name,
				fmt.Sprintf("step %s runs once per item, so it puts %s once per item: a value read by another step must come from a step that runs once (nested fan-out is not taken); join the items in a step after %s and put the value there", p.Name, refs[key].Name, p.Name)))
		}
	}
	return errs
}
