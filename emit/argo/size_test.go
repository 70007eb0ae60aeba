package argo_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manifoldflow/manifold/emit"
	"github.com/manifoldflow/manifold/emit/argo"
	"github.com/manifoldflow/manifold/harness/benchflow"
	"github.com/manifoldflow/manifold/harness/testflows"
	"github.com/manifoldflow/manifold/plan"
	"github.com/manifoldflow/manifold/sdk"
)

// TestFiveHundredStepsFit: 500 generated steps, one in ten on two nodes, are
// written in WorkflowTemplates each within the default limit and PartMaxBytes.
func TestFiveHundredStepsFit(t *testing.T) {
	p := testflows.Compile(t, benchflow.Flow(benchflow.FanOut, 500, benchflow.Options{}))
	e := emitArgo(t, p)
	for i, size := range e.sizes {
		if size > min(plan.DefaultArgoMaxBytes, argo.PartMaxBytes) {
			t.Errorf("document %d of 500 steps takes %d bytes, more than %d", i, size, argo.PartMaxBytes)
		}
	}
}

// TestNoLimitNoSplit: with argo_max_bytes -1 a flow is one WorkflowTemplate
// whatever its size.
func TestNoLimitNoSplit(t *testing.T) {
	p := testflows.Compile(t, benchflow.Flow(benchflow.Chain, 1500, benchflow.Options{}))
	p.ArgoMaxBytes = -1
	e := emitArgo(t, p)
	if len(e.order) != 1 || e.sizes[0] <= plan.DefaultArgoMaxBytes {
		t.Errorf("WorkflowTemplates %v of sizes %v; want one of more than %d bytes", e.order, e.sizes, plan.DefaultArgoMaxBytes)
	}
}

// TestStepTooLargeRefused: a step whose WorkflowTemplate alone is over the
// limit is an error naming the step, its size and what to do; the flow is
// written when the limit allows it.
func TestStepTooLargeRefused(t *testing.T) {
	items := make([]string, 400)
	for i := range items {
		items[i] = strings.Repeat("x", 100) + strconv.Itoa(i)
	}
	f := sdk.NewFlow("big", sdk.Image("busybox")).
		Step("small", sdk.Command("true")).
		Step("huge", sdk.Command("true"), sdk.After("small"), sdk.Foreach(items...))
	p := testflows.Compile(t, f)
	p.ArgoMaxBytes = 20000
	_, errs := emit.Files(argo.Target{}, p)
	want := field.ErrorList{field.Forbidden(field.NewPath("steps").Key("huge"), "")}
	if diff := cmp.Diff(want, errs, cmpopts.IgnoreFields(field.Error{}, "Detail")); diff != "" {
		t.Fatalf("errors (-want +got):\n%s", diff)
	}
	for _, part := range []string{"20000 bytes", "fewer foreach items", "--target job", "argo_max_bytes"} {
		if !strings.Contains(errs[0].Detail, part) {
			t.Errorf("the error does not say %q: %s", part, errs[0].Detail)
		}
	}
	p.ArgoMaxBytes = 0
	if _, errs := emit.Files(argo.Target{}, p); len(errs) > 0 {
		t.Errorf("within the default limit: %v", errs.ToAggregate())
	}
}
