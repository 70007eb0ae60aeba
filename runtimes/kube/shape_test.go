package kube

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/manifoldflow/manifold/compile"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/runtimes/record"
	"github.com/manifoldflow/manifold/sdk"
)

// unitsOf compiles f and builds the units of a run of it as as.
func unitsOf(t *testing.T, f *sdk.Flow, as string) (*plan.Flow, []*unit) {
	t.Helper()
	p, errs := compile.Compile(f, compile.Options{})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	p.Run = "20261205-120000-abcdef"
	units, errs := plan2units(p, as, "ns")
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return p, units
}

// TestDryRunAsksOnePerShape: a foreach step's items are one Indexed Job and
// the ConfigMap of its items, each asked once; the Jobs (and pods) of a step
// whose items are Jobs of their own (a multi-node step's) differ only in their
// names and item, and are asked once; two steps are asked apart; a multi-node
// item's Service is asked once for all; a JobSet's replicated jobs are one pod
// each, asked once when alike.
func TestDryRunAsksOnePerShape(t *testing.T) {
	f := sdk.NewFlow("shapes", sdk.Image("example.com/flow:v1")).
		Step("fan", sdk.Command("true"), sdk.Foreach("a", "b", "c")).
		Step("other", sdk.Command("true"), sdk.After("fan")).
		Step("wide", sdk.Command("true"), sdk.Nodes(2), sdk.Foreach("x", "y"))
	for _, tc := range []struct {
		as   string
		want []string // what is asked, with how many objects each stands for
	}{
		{AsJob, []string{"ConfigMap fan 1", "Job fan 1", "pod fan 1", "Job other 1", "pod other 1", "Service wide 2", "Job wide 2", "pod wide 2"}},
		// A multi-node item's pods find rank 0 under the name of their replicated
		// job: they differ, and are asked apart.
		{AsJobSet, []string{"JobSet fan 1", "pod fan 3", "JobSet other 1", "pod other 1", "JobSet wide 1", "pod wide 1", "pod wide 1"}},
	} {
		t.Run(tc.as, func(t *testing.T) {
			_, units := unitsOf(t, f, tc.as)
			asks, err := dryRunAsks(units, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range asks {
				kind := a.obj.GetKind()
				if kind == "Pod" {
					kind = "pod"
				}
				got = append(got, kind+" "+a.unit.Step.Name+" "+strconv.Itoa(a.shared))
			}
			if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
				t.Errorf("asked %s; want %s", strings.Join(got, ", "), strings.Join(tc.want, ", "))
			}
		})
	}
}

// TestDryRunShapeTellsItemsApartByMoreThanTheirValue: an item's object that
// differs in more than its name and item (here, its image) is asked on its own.
// The step's command names MANIFOLD_ITEM, so that each item is a Job of its own.
func TestDryRunShapeTellsItemsApartByMoreThanTheirValue(t *testing.T) {
	_, units := unitsOf(t, sdk.NewFlow("shapes", sdk.Image("example.com/flow:v1")).
		Step("fan", sdk.Command("echo", "$(MANIFOLD_ITEM)"), sdk.Foreach("a", "b")), AsJob)
	if len(units) != 2 {
		t.Fatalf("%d units; want 2", len(units))
	}
	a, b := units[0].objects[0].u, units[1].objects[0].u
	ka, _ := shape(a)
	kb, _ := shape(b)
	if ka != kb {
		t.Fatalf("two items of one step have different shapes:\n%s\n%s", ka, kb)
	}
	b = b.DeepCopy()
	containers := b.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
	containers[0].(map[string]any)["image"] = "example.com/other:v2"
	if kb, _ = shape(b); ka == kb {
		t.Errorf("an item with another image has the shape of the first")
	}
}

// TestToCreateLeavesOutWhatSucceeded: a resumed run dry-runs only what it will
// create, not the units its record holds as succeeded (for the same item).
func TestToCreateLeavesOutWhatSucceeded(t *testing.T) {
	_, units := unitsOf(t, sdk.NewFlow("resume", sdk.Image("example.com/flow:v1")).
		Step("a", sdk.Command("true")).
		Step("fan", sdk.Command("true"), sdk.After("a"), sdk.Foreach("x", "y")), AsJob)
	dir := filepath.Join(t.TempDir(), "run")
	if got := toCreate(dir, units, nil); len(got) != 3 {
		t.Fatalf("a new run creates %d units; want 3", len(got))
	}
	done := func(step string, index int, item string) {
		task := record.Task{Step: step, State: record.Succeeded, Item: item}
		if index >= 0 {
			task.Index = &index
		}
		if err := record.WriteTask(dir, task); err != nil {
			t.Fatal(err)
		}
	}
	done("a", -1, "")
	done("fan", 0, "x")
	done("fan", 1, "changed") // another item than the flow's now: made again
	var got []string
	for _, u := range toCreate(dir, units, nil) {
		got = append(got, u.Label)
	}
	if strings.Join(got, ",") != "fan[1]" {
		t.Errorf("a resumed run dry-runs %v; want fan[1] alone", got)
	}
}

// TestQuotaFits tells a quota refused for what others use now from one that
// could never hold the object.
func TestQuotaFits(t *testing.T) {
	for msg, want := range map[string]bool{
		"exceeded quota: room, requested: requests.cpu=2, used: requests.cpu=3, limited: requests.cpu=4":                                    true,
		"exceeded quota: room, requested: requests.cpu=5, used: requests.cpu=0, limited: requests.cpu=4":                                    false,
		"exceeded quota: room, requested: pods=1,requests.memory=2Gi, used: pods=0,requests.memory=0, limited: pods=10,requests.memory=1Gi": false,
		"failed quota: room: must specify limits.cpu for: main":                                                                             false,
	} {
		if got := quotaFits(msg); got != want {
			t.Errorf("quotaFits(%q) = %t; want %t", msg, got, want)
		}
	}
}
