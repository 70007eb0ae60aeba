package main

import (
	"encoding/json"
	"fmt"
	"io"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v3/util/template"
	"github.com/argoproj/argo-workflows/v3/workflow/common"
)

// printManifests writes the manifest of every resource template that a DAG task of
// a WorkflowTemplate in docs runs, once per item of a withItems task, substituted
// as Argo's controller substitutes it.
func printManifests(w io.Writer, docs []document, uid string) error {
	for _, d := range docs {
		if d.err != nil {
			return fmt.Errorf("%s: %v", d, d.err)
		}
		var meta struct{ Kind string }
		if err := decode(d.data, &meta); err != nil && meta.Kind == "" {
			return fmt.Errorf("%s: %v", d, err)
		}
		if meta.Kind != "WorkflowTemplate" {
			continue
		}
		var wt wfv1.WorkflowTemplate
		if err := decode(d.data, &wt); err != nil {
			return fmt.Errorf("%s: %v", d, err)
		}
		if err := templateManifests(w, &wt, uid); err != nil {
			return fmt.Errorf("%s: WorkflowTemplate %s: %v", d, wt.Name, err)
		}
	}
	return nil
}

func templateManifests(w io.Writer, wt *wfv1.WorkflowTemplate, uid string) error {
	globals := common.Parameters{common.GlobalVarWorkflowUID: uid}
	for _, p := range wt.Spec.Arguments.Parameters {
		globals["workflow.parameters."+p.Name] = p.Value.String()
	}
	entry := wt.GetTemplateByName(wt.Spec.Entrypoint)
	if entry == nil || entry.DAG == nil {
		return fmt.Errorf("entrypoint %q is not a DAG template", wt.Spec.Entrypoint)
	}
	for _, task := range entry.DAG.Tasks {
		tmpl := wt.GetTemplateByName(task.Template)
		if tmpl == nil || tmpl.Resource == nil {
			continue
		}
		items := task.WithItems
		if len(items) == 0 {
			items = []wfv1.Item{{}}
		}
		for i, item := range items {
			args, err := expand(task.Arguments, item, len(task.WithItems) > 0)
			if err != nil {
				return fmt.Errorf("task %s item %d: %v", task.Name, i, err)
			}
			t := tmpl.DeepCopy()
			for j := range t.Inputs.Parameters {
				arg := args.GetParameterByName(t.Inputs.Parameters[j].Name)
				if arg == nil {
					return fmt.Errorf("task %s passes no input %s", task.Name, t.Inputs.Parameters[j].Name)
				}
				t.Inputs.Parameters[j].Value = arg.Value
			}
			out, err := common.SubstituteParams(t, globals, common.Parameters{})
			if err != nil {
				return fmt.Errorf("task %s item %d: %v", task.Name, i, err)
			}
			fmt.Fprintf(w, "# template %s task %s item %d\n%s\n---\n", tmpl.Name, task.Name, i, out.Resource.Manifest)
		}
	}
	return nil
}

// expand substitutes a withItems item into a task's arguments as the controller's
// expandTask does: {{item}} is the item's JSON, {{item.KEY}} each of its fields.
func expand(args wfv1.Arguments, item wfv1.Item, withItems bool) (wfv1.Arguments, error) {
	if !withItems {
		return args, nil
	}
	data, err := json.Marshal(args)
	if err != nil {
		return args, err
	}
	params := map[string]any{"item": string(item.Value)}
	var fields map[string]any
	if json.Unmarshal(item.Value, &fields) == nil {
		for k, v := range fields {
			params["item."+k] = fmt.Sprint(v)
		}
	}
	out, err := template.Replace(string(data), params, false)
	if err != nil {
		return args, err
	}
	var expanded wfv1.Arguments
	err = json.Unmarshal([]byte(out), &expanded)
	return expanded, err
}
