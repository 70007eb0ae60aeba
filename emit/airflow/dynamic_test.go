package airflow_test

import (
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/sdk"
)

// TestDynamicRefused: what the airflow target cannot run of a dynamic flow
// is an error naming the step and the option: a value published by a
// Command step (whose pod cannot write the values file) or by a multi-node
// step, and a multi-node step that fans out or branches.
func TestDynamicRefused(t *testing.T) {
	run := sdk.Run(func(*sdk.Context) error { return nil })
	multi := []sdk.StepOption{sdk.Nodes(2), sdk.InstanceType("trn1.32xlarge"), sdk.Trainium(16), sdk.EFA(8)}
	for _, tt := range []struct {
		name  string
		flow  *sdk.Flow
		field string
	}{
		{"command producer", sdk.NewFlow("d", sdk.Image("example.com/d:v1")).
			Step("list", sdk.Command("list")).
			Step("each", run, sdk.ForeachOf("list", "shards")), "steps[list].command"},
		{"multi-node producer", sdk.NewFlow("d", sdk.Image("example.com/d:v1")).
			Step("list", append([]sdk.StepOption{run}, multi...)...).
			Step("each", run, sdk.When("list", "go", true)), "steps[list].nodes"},
		{"multi-node branch", sdk.NewFlow("d", sdk.Image("example.com/d:v1")).
			Step("list", run).
			Step("train", append([]sdk.StepOption{run, sdk.When("list", "go", true)}, multi...)...), "steps[train].when"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, errs := compile.Compile(tt.flow, compile.Options{})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			_, errs = emit.Files(airflow.Target{}, p)
			if len(errs) != 1 || errs[0].Field != tt.field || errs[0].Type != field.ErrorTypeForbidden {
				t.Errorf("errors %v; want one Forbidden at %s", errs, tt.field)
			}
		})
	}
}

// TestDynamicKPO: in .kpo.json a gate says what it reads and compares, a
// branch on a fan-out step puts its when task before its items task, and a
// fan-out says the items task it is mapped over and the environment each
// item fills in.
func TestDynamicKPO(t *testing.T) {
	run := sdk.Run(func(*sdk.Context) error { return nil })
	p, errs := compile.Compile(sdk.NewFlow("d", sdk.Image("example.com/d:v1")).
		Step("list", run).
		Step("each", run, sdk.ForeachOf("list", "shards"), sdk.When("list", "go", 3.0)), compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	files, errs := emit.Files(airflow.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var kpo airflow.KPOFile
	for _, f := range files {
		if f.Name == "d.kpo.json" {
			if err := json.Unmarshal(f.Data, &kpo); err != nil {
				t.Fatal(err)
			}
		}
	}
	byID := map[string]airflow.KPOTask{}
	var order []string
	for _, k := range kpo.Tasks {
		byID[k.TaskID], order = k, append(order, k.TaskID)
	}
	if want := []string{"list", "each_when", "each_items", "each"}; !slices.Equal(order, want) {
		t.Fatalf("tasks %v, want %v", order, want)
	}
	if g := byID["each_when"].Gate; g == nil || g.Kind != airflow.GateWhen || g.Producer != "list" || g.Name != "go" || g.Want != "3" {
		t.Errorf("each_when's gate %+v; want when list's go is 3", g)
	}
	if g := byID["each_items"].Gate; g == nil || g.Kind != airflow.GateItems || g.Producer != "list" || g.Name != "shards" || !slices.Equal(byID["each_items"].Upstream, []string{"each_when"}) {
		t.Errorf("each_items: gate %+v after %v; want the items of list's shards, after each_when", g, byID["each_items"].Upstream)
	}
	x := byID["each"].ExpandFrom
	if x == nil || x.Task != "each_items" || !slices.Equal(byID["each"].Upstream, []string{"each_items"}) {
		t.Fatalf("each: expand_from %+v after %v", x, byID["each"].Upstream)
	}
	filled := 0
	for _, e := range x.EnvVars {
		if e.Value == airflow.ItemPlaceholder {
			filled++
		}
	}
	if filled != 3 {
		t.Errorf("each's environment has %d variables each item fills in, want 3 (item, index, count): %v", filled, x.EnvVars)
	}
	if byID["list"].Arguments["do_xcom_push"] != true {
		t.Errorf("list, whose values later steps read, does not push them to XCom: %v", byID["list"].Arguments)
	}
}
