package simcluster

import (
	"fmt"
	"strconv"
)

// ControlPlane sizes the cluster's control plane (Options.ControlPlane): the
// client limits with which kube-controller-manager and kube-scheduler talk to
// the API server, and how many Jobs and garbage-collected objects the
// controller manager works on at once. A zero field leaves the component's
// default; the zero value is a stock control plane.
type ControlPlane struct {
	// ControllerQPS and ControllerBurst are kube-controller-manager's
	// --kube-api-qps and --kube-api-burst (defaults 20 and 30), the limits of
	// each of its controllers' clients: the Job controller's, which creates
	// each Job's pods and writes each Job's status, and the garbage
	// collector's, which deletes what a deleted object owned.
	ControllerQPS   float64
	ControllerBurst int
	// SchedulerQPS and SchedulerBurst are kube-scheduler's --kube-api-qps and
	// --kube-api-burst (defaults 50 and 100): it binds each pod with one
	// request.
	SchedulerQPS   float64
	SchedulerBurst int
	// ConcurrentJobSyncs is kube-controller-manager's --concurrent-job-syncs
	// (default 5), ConcurrentGCSyncs its --concurrent-gc-syncs (default 20).
	ConcurrentJobSyncs, ConcurrentGCSyncs int
}

// LoadControlPlane is a control plane sized for load, as a production
// cluster's that runs thousands of pods at once is sized: the controller
// manager and the scheduler may each send 200 requests a second (burst 400),
// and the controller manager syncs 50 Jobs and 50 garbage collections at
// once. At the stock 20 requests a second, the Job controller and the
// garbage collector bound a 1,000-step fan-out (docs/performance.md, "Load on
// a cluster"). kwok's own
// cluster tool lifts these limits altogether (5,000 a second) for its load
// clusters. The runner under test keeps its own defaults: only the cluster
// is sized.
func LoadControlPlane() ControlPlane {
	return ControlPlane{
		ControllerQPS: 200, ControllerBurst: 400,
		SchedulerQPS: 200, SchedulerBurst: 400,
		ConcurrentJobSyncs: 50, ConcurrentGCSyncs: 50,
	}
}

// validate says which field of cp is out of range.
func (cp ControlPlane) validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"ControllerQPS", cp.ControllerQPS},
		{"ControllerBurst", float64(cp.ControllerBurst)},
		{"SchedulerQPS", cp.SchedulerQPS},
		{"SchedulerBurst", float64(cp.SchedulerBurst)},
		{"ConcurrentJobSyncs", float64(cp.ConcurrentJobSyncs)},
		{"ConcurrentGCSyncs", float64(cp.ConcurrentGCSyncs)},
	} {
		if f.v < 0 {
			return fmt.Errorf("simcluster options: ControlPlane.%s: %v must not be negative (0 keeps the component's default)", f.name, f.v)
		}
	}
	return nil
}

// controllerManagerFlags are kube-controller-manager's flags for cp.
func (cp ControlPlane) controllerManagerFlags() []string {
	var out []string
	out = appendQPS(out, cp.ControllerQPS, cp.ControllerBurst)
	if cp.ConcurrentJobSyncs > 0 {
		out = append(out, "--concurrent-job-syncs="+strconv.Itoa(cp.ConcurrentJobSyncs))
	}
	if cp.ConcurrentGCSyncs > 0 {
		out = append(out, "--concurrent-gc-syncs="+strconv.Itoa(cp.ConcurrentGCSyncs))
	}
	return out
}

// schedulerFlags are kube-scheduler's flags for cp.
func (cp ControlPlane) schedulerFlags() []string {
	return appendQPS(nil, cp.SchedulerQPS, cp.SchedulerBurst)
}

// appendQPS appends the client-limit flags that qps and burst set.
func appendQPS(out []string, qps float64, burst int) []string {
	if qps > 0 {
		out = append(out, "--kube-api-qps="+strconv.FormatFloat(qps, 'f', -1, 64))
	}
	if burst > 0 {
		out = append(out, "--kube-api-burst="+strconv.Itoa(burst))
	}
	return out
}
