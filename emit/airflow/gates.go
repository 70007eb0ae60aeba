package airflow

import (
	"maps"
	"reflect"
	"slices"
)

// gate writes the PythonOperator task of a gate: its function, given the
// producing task's XCom (resolved, never rendered) and the gate's own
// values (which Airflow renders: literal where rendering could change them,
// the items' templates as templates).
func (p *printer) gate(t *Task) {
	g := t.Gate
	p.begin(2, "tasks[")
	p.str(t.ID, false)
	p.end("] = PythonOperator(")
	p.begin(3, "task_id=")
	p.str(t.ID, false)
	p.end(",")
	fn := "_manifold_items"
	if g.Kind == GateWhen {
		fn = "_manifold_when"
	}
	p.line(3, "python_callable="+fn+",")
	p.line(3, "op_args=[")
	p.begin(4, "tasks[")
	p.str(g.Producer, false)
	p.end("].output,")
	for _, v := range []string{g.Producer, g.Name, g.Step} {
		p.begin(4, "")
		p.str(v, true)
		p.end(",")
	}
	if g.Kind == GateWhen {
		p.begin(4, "")
		p.str(g.Want, true)
		p.end(",")
	} else {
		p.line(4, "{")
		for _, name := range slices.Sorted(maps.Keys(g.Templates)) {
			p.begin(5, "")
			p.str(name, false)
			p.raw(": ")
			p.str(g.Templates[name], false)
			p.end(",")
		}
		p.line(4, "},")
	}
	p.line(3, "],")
	for _, a := range t.Args {
		if a.Name != "task_id" {
			p.arg(a)
		}
	}
	p.line(2, ")")
}

// itemsFrom ends a mapped task over the items of its items task: each
// item's environment is ItemEnv with the item's variables and the rendered
// templates filled in. That environment comes from an XCom, which Airflow
// does not render, so no value of it is wrapped in literal.
func (p *printer) itemsFrom(t *Task) {
	p.line(2, ").expand(")
	p.begin(3, "env_vars=tasks[")
	p.str(t.ItemsFrom, false)
	p.end("].output.map(_manifold_item_env([")
	for i := range t.ItemEnv {
		p.begin(4, "")
		p.value(reflect.ValueOf(&t.ItemEnv[i]).Elem(), false)
		p.end(",")
	}
	p.line(3, "])),")
	p.line(2, ")")
}

// gateFunctions are the functions of the gates, written once in a DAG file
// that has any. A step's values come from its task's XCom: the object of
// the values file (plan.EnvValuesFile), each value's JSON text, canonical
// JSON and, for a list, the text of each element. An item's MANIFOLD_ITEM
// has each "$" doubled, which the kubelet's $(NAME) expansion of the
// variable gives back as one: the item reaches the step as it was put.
const gateFunctions = `from airflow.sdk.exceptions import AirflowSkipException


def _manifold_value(values, producer, name, step):
    """The value name that step producer published, as its task's XCom holds it."""
    if not isinstance(values, dict) or not isinstance(values.get(name), dict):
        raise ValueError(
            "step %s reads the value %s of step %s, which step %s did not put" % (step, name, producer, producer)
        )
    return values[name]


def _manifold_items(values, producer, name, step, templates):
    """The items of step's fan-out over producer's value name, for its mapped task."""
    items = _manifold_value(values, producer, name, step).get("items")
    if items is None:
        raise ValueError(
            "artifact %r of step %r is not a JSON list: a fan-out needs one, such as [\"a\", \"b\"]" % (name, producer)
        )
    return [{"item": text, "index": i, "count": len(items), "templates": templates} for i, text in enumerate(items)]


def _manifold_item_env(env):
    """The environment of each item of a fan-out: env, the item's variables filled in."""

    def item_env(item):
        values = dict(item["templates"])
        values["MANIFOLD_ITEM"] = item["item"].replace("$", "$$")
        values["MANIFOLD_INDEX"] = str(item["index"])
        values["MANIFOLD_COUNT"] = str(item["count"])
        return [k8s.V1EnvVar(name=e.name, value=values[e.name]) if e.name in values else e for e in env]

    return item_env


def _manifold_when(values, producer, name, step, want):
    """Skips step (through this task) unless producer's value name is want."""
    value = _manifold_value(values, producer, name, step)
    if value["canonical"] != want:
        raise AirflowSkipException(
            "not taken: %s's %s is %s, and %s runs when it is %s" % (producer, name, value["json"].strip(), step, want)
        )


`
