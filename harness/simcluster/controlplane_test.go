package simcluster

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestControlPlaneFlags checks the flags each sizing gives the controller
// manager and the scheduler: none for the zero value (the components'
// defaults), each field its own flag, and only the fields set.
func TestControlPlaneFlags(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cp         ControlPlane
		kcm, sched []string
	}{
		{name: "stock", cp: ControlPlane{}},
		{
			name:  "load",
			cp:    LoadControlPlane(),
			kcm:   []string{"--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-job-syncs=50", "--concurrent-gc-syncs=50"},
			sched: []string{"--kube-api-qps=200", "--kube-api-burst=400"},
		},
		{
			name:  "some",
			cp:    ControlPlane{ControllerQPS: 12.5, SchedulerBurst: 7, ConcurrentGCSyncs: 3},
			kcm:   []string{"--kube-api-qps=12.5", "--concurrent-gc-syncs=3"},
			sched: []string{"--kube-api-burst=7"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cp.validate(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.kcm, tc.cp.controllerManagerFlags()); diff != "" {
				t.Errorf("kube-controller-manager's flags (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.sched, tc.cp.schedulerFlags()); diff != "" {
				t.Errorf("kube-scheduler's flags (-want +got):\n%s", diff)
			}
		})
	}
}

// TestControlPlaneNegative checks that Start refuses a negative sizing, naming
// the field, before it starts anything.
func TestControlPlaneNegative(t *testing.T) {
	for _, cp := range []ControlPlane{{SchedulerQPS: -1}, {ConcurrentJobSyncs: -5}} {
		c, err := Start(context.Background(), Options{ControlPlane: cp})
		if c != nil {
			c.Stop()
			t.Fatalf("Start(%+v) started a cluster", cp)
		}
		if err == nil {
			t.Fatalf("Start(%+v): no error", cp)
		}
		field := "SchedulerQPS"
		if cp.ConcurrentJobSyncs != 0 {
			field = "ConcurrentJobSyncs"
		}
		if !strings.Contains(err.Error(), "ControlPlane."+field) {
			t.Errorf("Start(%+v): %v; want it to name ControlPlane.%s", cp, err, field)
		}
	}
}
