package airflow

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	emitairflow "github.com/manifoldflow/manifold/emit/airflow"
	"github.com/manifoldflow/manifold/plan"
)

// TestRunParams: every param of the flow, at the value trigger gave it or
// else at its default.
func TestRunParams(t *testing.T) {
	f := &plan.Flow{Params: []plan.Param{{Name: "size", Value: "small"}, {Name: "lr", Value: "0.1"}}}
	got := RunParams(f, map[string]string{"size": "large"})
	if diff := cmp.Diff(map[string]string{"size": "large", "lr": "0.1"}, got); diff != "" {
		t.Errorf("params (-want +got):\n%s", diff)
	}
}

// TestTriggerConf: the params, with the trace context when there is one, and
// nil when there is neither.
func TestTriggerConf(t *testing.T) {
	if conf := TriggerConf(nil, ""); conf != nil {
		t.Errorf("conf of nothing = %v, want nil", conf)
	}
	params := map[string]string{"size": "large"}
	got := TriggerConf(params, "00-trace")
	want := map[string]string{"size": "large", emitairflow.ConfTraceParent: "00-trace"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("conf (-want +got):\n%s", diff)
	}
	if len(params) != 1 {
		t.Errorf("TriggerConf changed its params: %v", params)
	}
}
