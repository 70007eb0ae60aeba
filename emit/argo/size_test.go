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
)

// TestFiveHundredStepsFit: a WorkflowTemplate of 500 generated steps, one in ten
// on two nodes, is under the default limit.
func TestFiveHundredStepsFit(t *testing.T) {
	p := testflows.Compile(t, benchflow.Flow(benchflow.FanOut, 500, benchflow.Options{}))
	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	if size := len(files[0].Data); size > plan.DefaultArgoMaxBytes {
		t.Errorf("500 steps take %d bytes, more than %d", size, plan.DefaultArgoMaxBytes)
	}
}

// TestTooLargeRefused: a WorkflowTemplate over argo_max_bytes is an error that
// gives its size and how to split the flow; one at the limit, or any with no
// limit, is written.
func TestTooLargeRefused(t *testing.T) {
	p := testflows.Compile(t, benchflow.Flow(benchflow.Chain, 1500, benchflow.Options{}))
	_, errs := emit.Files(argo.Target{}, p)
	want := field.ErrorList{field.Forbidden(field.NewPath("steps"), "")}
	if diff := cmp.Diff(want, errs, cmpopts.IgnoreFields(field.Error{}, "Detail")); diff != "" {
		t.Fatalf("errors (-want +got):\n%s", diff)
	}
	for _, part := range []string{"1500 steps", strconv.Itoa(plan.DefaultArgoMaxBytes) + " bytes", "split the flow into flows of at most about", "--target job"} {
		if !strings.Contains(errs[0].Detail, part) {
			t.Errorf("the error does not say %q: %s", part, errs[0].Detail)
		}
	}

	p.ArgoMaxBytes = -1
	files, errs := emit.Files(argo.Target{}, p)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	// The WorkflowTemplate is the document after the header.
	_, doc, _ := strings.Cut(string(files[0].Data), "\n---\n")
	size := len(doc)
	if size <= plan.DefaultArgoMaxBytes {
		t.Fatalf("the flow's WorkflowTemplate is only %d bytes", size)
	}
	if detail := errsDetail(t, p, size-1); !strings.Contains(detail, strconv.Itoa(size)+" bytes") {
		t.Errorf("one byte over the limit: the error does not give the size %d: %s", size, detail)
	}
	p.ArgoMaxBytes = size
	if _, errs := emit.Files(argo.Target{}, p); len(errs) > 0 {
		t.Errorf("a WorkflowTemplate of exactly argo_max_bytes was refused: %v", errs.ToAggregate())
	}
}

// errsDetail emits p with the limit max and returns the error's detail.
func errsDetail(t *testing.T, p *plan.Flow, max int) string {
	t.Helper()
	p.ArgoMaxBytes = max
	_, errs := emit.Files(argo.Target{}, p)
	if len(errs) != 1 {
		t.Fatalf("with argo_max_bytes %d: errors %v", max, errs)
	}
	return errs[0].Detail
}
